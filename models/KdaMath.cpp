//===- KdaMath.cpp - KDA recurrence and chunk form in fp64 ----------------===//

#include "models/KdaMath.h"

#include <cmath>
#include <vector>

namespace k3c {

void kdaRecurrentF64(int64_t T, int64_t dk, int64_t dv, const double *q, const double *k,
                     const double *v, const double *g, const double *beta, double *S,
                     double *o) {
  std::vector<double> pred(dv);
  for (int64_t t = 0; t < T; ++t) {
    const double *qt = q + t * dk, *kt = k + t * dk, *gt = g + t * dk, *vt = v + t * dv;
    for (int64_t i = 0; i < dk; ++i) {
      double a = std::exp(gt[i]);
      for (int64_t j = 0; j < dv; ++j)
        S[i * dv + j] *= a;
    }
    for (int64_t j = 0; j < dv; ++j) {
      double s = 0;
      for (int64_t i = 0; i < dk; ++i)
        s += S[i * dv + j] * kt[i];
      pred[j] = s;
    }
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j)
        S[i * dv + j] += beta[t] * kt[i] * (vt[j] - pred[j]);
    for (int64_t j = 0; j < dv; ++j) {
      double s = 0;
      for (int64_t i = 0; i < dk; ++i)
        s += S[i * dv + j] * qt[i];
      o[t * dv + j] = s;
    }
  }
}

void kdaChunkedF64(int64_t T, int64_t C, int64_t dk, int64_t dv, const double *q,
                   const double *k, const double *v, const double *g, const double *beta,
                   double *S, double *o) {
  for (int64_t t0 = 0; t0 < T; t0 += C) {
    int64_t n = T - t0 < C ? T - t0 : C;
    std::vector<double> G(n * dk), Kd(n * dk), Ki(n * dk), Qd(n * dk), Kr(n * dk);
    for (int64_t c = 0; c < dk; ++c) {
      double acc = 0;
      for (int64_t r = 0; r < n; ++r) {
        acc += g[(t0 + r) * dk + c];
        G[r * dk + c] = acc;
      }
    }
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < dk; ++c) {
        double gr = G[r * dk + c], gl = G[(n - 1) * dk + c];
        double kv = k[(t0 + r) * dk + c];
        Kd[r * dk + c] = kv * std::exp(gr);
        Ki[r * dk + c] = kv * std::exp(-gr);
        Qd[r * dk + c] = q[(t0 + r) * dk + c] * std::exp(gr);
        Kr[r * dk + c] = kv * std::exp(gl - gr);
      }
    // L (strictly lower, beta-scaled rows) and Mqk (lower incl. diagonal).
    std::vector<double> L(n * n, 0.0), M(n * n, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        double l = 0, m = 0;
        for (int64_t c = 0; c < dk; ++c) {
          l += Kd[i * dk + c] * Ki[j * dk + c];
          m += Qd[i * dk + c] * Ki[j * dk + c];
        }
        if (j < i)
          L[i * n + j] = beta[t0 + i] * l;
        M[i * n + j] = m;
      }
    // W = beta (V - Kd S); U = (I + L)^-1 W by forward substitution.
    std::vector<double> U(n * dv);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < dv; ++j) {
        double ks = 0;
        for (int64_t c = 0; c < dk; ++c)
          ks += Kd[r * dk + c] * S[c * dv + j];
        double w = beta[t0 + r] * (v[(t0 + r) * dv + j] - ks);
        for (int64_t s = 0; s < r; ++s)
          w -= L[r * n + s] * U[s * dv + j];
        U[r * dv + j] = w;
      }
    // O = Qd S + Mqk U.
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < dv; ++j) {
        double acc = 0;
        for (int64_t c = 0; c < dk; ++c)
          acc += Qd[r * dk + c] * S[c * dv + j];
        for (int64_t s = 0; s <= r; ++s)
          acc += M[r * n + s] * U[s * dv + j];
        o[(t0 + r) * dv + j] = acc;
      }
    // S' = Diag(exp G_C) S + Kr^T U.
    for (int64_t c = 0; c < dk; ++c) {
      double a = std::exp(G[(n - 1) * dk + c]);
      for (int64_t j = 0; j < dv; ++j) {
        double acc = a * S[c * dv + j];
        for (int64_t r = 0; r < n; ++r)
          acc += Kr[r * dk + c] * U[r * dv + j];
        S[c * dv + j] = acc;
      }
    }
  }
}

} // namespace k3c
