// The one gateway to LLVM's headers (STYLE.md 7): codegen/ includes LLVM
// only through this file, and nothing outside codegen/ includes it.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>
#pragma GCC diagnostic pop
