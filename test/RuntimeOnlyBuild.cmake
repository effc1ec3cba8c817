# Configures and builds k3c with -DK3C_RUNTIME_ONLY=ON (no find_package(MLIR)),
# checks that k3-run links no LLVM/MLIR library, and runs it on a compiled
# k3-tiny artifact with --check.
file(REMOVE_RECURSE ${BIN})
execute_process(COMMAND ${CMAKE_COMMAND} -G Ninja -S ${SRC} -B ${BIN} -DK3C_RUNTIME_ONLY=ON
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "runtime-only configure failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN} --target k3-run RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "runtime-only build failed")
endif()
execute_process(COMMAND ldd ${BIN}/bin/k3-run OUTPUT_VARIABLE libs)
if(libs MATCHES "LLVM|MLIR")
  message(FATAL_ERROR "the runtime-only k3-run links LLVM/MLIR:\n${libs}")
endif()
execute_process(COMMAND ${TOOLS}/k3-mkcheckpoint --config ${SRC}/models/configs/k3-tiny.json
                        -o ${BIN}/ckpt --seed 4 --quiet RESULT_VARIABLE rc)
execute_process(COMMAND ${TOOLS}/k3-compile ${BIN}/ckpt -o ${BIN}/art --target=host
                        --activation-dtype=f32 --max-tokens 32 --max-seqs 2 --max-context 64 --quiet
                RESULT_VARIABLE rc2)
if(rc OR rc2)
  message(FATAL_ERROR "could not prepare the artifact")
endif()
execute_process(COMMAND ${BIN}/bin/k3-run ${BIN}/art --prompt-ids 5,6,7 --max-new-tokens 3 --check
                        --quiet RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message("${out}")
if(rc OR NOT out MATCHES "check: PASSED")
  message(FATAL_ERROR "the runtime-only k3-run failed its check")
endif()
