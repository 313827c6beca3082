//===- StorageAliasOpInterface.td - reused storage ---------*- tablegen -*-===//
//
// The op-side half of the storage model (Analysis/StorageAlias.h,
// StorageLiveness.h): an op declares which of its results reuse which
// operand's storage, so the report's liveness, the memory plan and the
// lowering's buffer binding follow it without a table of op names.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_INTERFACES_STORAGEALIASOPINTERFACE_TD
#define FSDP_INTERFACES_STORAGEALIASOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def StorageAliasOpInterface : OpInterface<"StorageAliasOpInterface"> {
  let cppNamespace = "::mlir::fsdp";
  let description = [{
    An op some of whose results are an operand's storage under a new name:
    renames that run nothing (a view of a flat parameter, a reshape) and
    in-place updates whose kernel writes the result over the operand (an
    optimizer step's parameter and state, batch norm's running statistics,
    the logits' gradient over logits nothing reads afterwards). Such a
    result owns no buffer: the lowering binds it to the operand's, and the
    report and the memory plan count the operand's storage as live until
    the result's last use.
  }];

  let methods = [
    InterfaceMethod<[{
        The operand whose storage result `resultIndex` reuses, or null when
        that result owns its storage.
      }],
      "::mlir::OpOperand *", "getReusedOperand",
      (ins "unsigned":$resultIndex)>,
    InterfaceMethod<[{
        Whether result `resultIndex` reuses its operand only where this op is
        the last to read that storage and the storage is an activation an
        op of the step computed (the kernel overwrites its input, which must
        then be dead); elsewhere the result gets its own buffer.
      }],
      "bool", "reusesOnlyDeadOperand", (ins "unsigned":$resultIndex),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{ return false; }]>,
    InterfaceMethod<[{
        Whether the op only renames storage: its one result is operand 0's
        storage (at an offset for a view), and it runs nothing.
      }],
      "bool", "isStorageRename", (ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{ return false; }]>,
    InterfaceMethod<[{
        Whether a storage rename also checks what it renames where it stands
        (nn.id_range's range check): it writes nothing, but runs a kernel
        that reads operand 0.
      }],
      "bool", "checksRenamedStorage", (ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{ return false; }]>,
  ];
}

#endif // FSDP_INTERFACES_STORAGEALIASOPINTERFACE_TD
