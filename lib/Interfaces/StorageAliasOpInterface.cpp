//===- StorageAliasOpInterface.cpp - reused storage -----------------------===//

#include "fsdp/Interfaces/StorageAliasOpInterface.h"

#include "fsdp/Interfaces/StorageAliasOpInterface.cpp.inc"
