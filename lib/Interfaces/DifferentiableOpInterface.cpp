//===- DifferentiableOpInterface.cpp - reverse-mode autodiff ---------------===//

#include "fsdp/Interfaces/DifferentiableOpInterface.h"

#include "fsdp/Interfaces/DifferentiableOpInterface.cpp.inc"
