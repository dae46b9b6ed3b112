// Bytes that are not UTF-8 on stdin are a diagnostic at the offending character with exit
// status 1, never a Python traceback (tests/ir/test_opt_tool.py has files and bytecode).
// RUN: printf 'func.func @f() {\n  \xe9\n}\n' | not adjit-opt 2>&1 | FileCheck %s --implicit-check-not=Traceback

// CHECK: -:2:3: error: unexpected character
