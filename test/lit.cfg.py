# -*- Python -*-
# lit configuration of the fsdp-mlir tests.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FSDP"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fsdp_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%examples", os.path.join(config.fsdp_src_root, "examples")))
config.substitutions.append(("%python", config.python_executable))
# The fsdp_mlir package (model builders), importable without installing it.
config.environment["PYTHONPATH"] = os.path.join(config.fsdp_src_root, "python")

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.fsdp_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    [ToolSubst(tool, unresolved="fatal")
     for tool in ("fsdp-opt", "fsdp-compile", "fsdprt-run", "llvm-nm")],
    tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.fsdp_tools_dir, append_path=True)
