# -*- Python -*-
# lit configuration for the k3c test suite.
import os
import shutil
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "K3C"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit"]
config.substitutions.append(("%python", sys.executable))
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.k3c_obj_root, "test")

config.substitutions.append(("%k3c_src", config.k3c_src_root))
config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tool_dirs = [config.k3c_tools_dir, config.llvm_tools_dir]
tools = ["k3-opt", "k3-compile", "k3-mkcheckpoint", "k3-ref", "k3-run", "k3-ep-bench", "k3-bench",
         "k3-tok"]
llvm_config.add_tool_substitutions(
    [t for t in tools if os.path.exists(os.path.join(config.k3c_tools_dir, t))],
    tool_dirs)

if shutil.which("ptxas") or os.path.exists("/usr/local/cuda/bin/ptxas"):
    config.available_features.add("ptxas")

# A usable NVIDIA driver (GPU tests need one; the no-GPU error test needs none).
try:
    import ctypes
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass

# OpenAI's tiktoken from npm (tools/setup.sh installs it under <build>/npm) and
# Node.js: the tokenizer's independent peer.
npm_modules = os.path.join(config.k3c_obj_root, "npm", "node_modules")
if shutil.which("node") and os.path.exists(os.path.join(npm_modules, "tiktoken", "package.json")):
    config.available_features.add("tiktoken-npm")
    config.substitutions.append(("%k3c_npm_modules", npm_modules))
