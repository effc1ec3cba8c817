//===- KdaMath.h - KDA recurrence and chunk form in fp64 ---------*- C++ -*-===//
//
// The two exact (fp64) forms of the gated delta rule for one head (spec §4.3
// step 8 and §4.4). The reference executor uses the recurrent form; the
// chunk form is the algebra the generated chunk kernels implement, and the
// test suite proves the two agree.
//
// Layouts: q, k, g: [T, dk]; v: [T, dv]; beta: [T]; S: [dk, dv] (in/out);
// o: [T, dv]. q is already L2-normalized and scaled.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_MODELS_KDAMATH_H
#define K3C_MODELS_KDAMATH_H

#include <cstdint>

namespace k3c {

/// Token by token: S <- Diag(exp g_t) S; S <- S + beta_t k_t (v_t - S^T k_t)^T;
/// o_t = S^T q_t.
void kdaRecurrentF64(int64_t T, int64_t dk, int64_t dv, const double *q, const double *k,
                     const double *v, const double *g, const double *beta, double *S,
                     double *o);

/// The factorized chunk form with chunk size C (last chunk shorter).
void kdaChunkedF64(int64_t T, int64_t C, int64_t dk, int64_t dv, const double *q,
                   const double *k, const double *v, const double *g, const double *beta,
                   double *S, double *o);

} // namespace k3c

#endif // K3C_MODELS_KDAMATH_H
