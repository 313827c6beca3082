// param-groups may set the optimizer's own hyper-parameters, as torch's
// param_groups override them: beta1 / beta2 / eps (Adam, AdamW), momentum /
// dampening (SGD). A flat parameter is updated by one op: parameters of one
// unit must agree on them (lr-scale and weight-decay alone become segments).
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="optimizer=adamw param-groups=fc2.*:beta1=0.8:eps=1e-6" | FileCheck %s --check-prefix=ADAMW
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="momentum=0.9 param-groups=fc3.*:momentum=0.5:dampening=0.1" | FileCheck %s --check-prefix=SGD
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=always optimizer=adam param-groups=fc2.*:beta2=0.95" | FileCheck %s --check-prefix=SHARD
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adamw param-groups=fc2.*:beta1=0.8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MIXED
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="param-groups=*.bias:beta1=0.8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SGD-BETA
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="optimizer=adam param-groups=*.bias:momentum=0.9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAM-MOMENTUM
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="optimizer=adamw param-groups=*.bias:beta2=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BETA-RANGE
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="momentum=0.9 param-groups=*.bias:momentum=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NO-BUFFER
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="param-groups=*.bias:momentum=0.9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEW-BUFFER
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="momentum=0.9 nesterov=true param-groups=*.bias:dampening=0.1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NESTEROV

// ADAMW: fsdp.adamw_step %arg0, {{.*}} {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = "", lr = 1.000000e-03 : f64}
// ADAMW: fsdp.adamw_step %arg2, {{.*}} {beta1 = 8.000000e-01 : f64, eps = 9.9999999999999995E-7 : f64,
// ADAMW: fsdp.adamw_step %arg3, {{.*}} {beta1 = 8.000000e-01 : f64, eps = 9.9999999999999995E-7 : f64,
// ADAMW: fsdp.adamw_step %arg4, {{.*}} {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = "", lr = 1.000000e-03 : f64}

// SGD: fsdp.sgd_step %arg0, {{.*}}momentum = 9.000000e-01 : f64
// SGD: fsdp.sgd_step %arg4, {{.*}}dampening = 1.000000e-01 : f64, {{.*}}momentum = 5.000000e-01 : f64

// Each Linear its own unit: fc2's flat parameter updates with beta2 0.95.
// SHARD: fsdp.adamw_step %arg0, {{.*}}fsdp.unit = "fc1", l2_weight_decay, lr = 1.000000e-03 : f64, weight_decay = 0.000000e+00 : f64}
// SHARD: fsdp.adamw_step %arg1, {{.*}}{beta2 = 0.94999999999999996 : f64, {{.*}}fsdp.unit = "fc2", l2_weight_decay,
// SHARD: fsdp.adamw_step %arg2, {{.*}}fsdp.unit = "fc3", l2_weight_decay, lr = 1.000000e-03 : f64, weight_decay = 0.000000e+00 : f64}

// MIXED: error: 'fsdp.module' op is an FSDP unit whose parameters 'fc1.weight' and 'fc2.weight' have different beta1 (param-groups): their flat parameter is updated with one beta1, beta2, eps, momentum and dampening (only lr-scale and weight-decay may differ within it); wrap them in separate units
// SGD-BETA: error: fsdp-build-train-step: param group '*.bias:beta1=0.8': unknown setting 'beta1' (weight-decay, lr-scale, momentum, dampening for sgd)
// ADAM-MOMENTUM: error: fsdp-build-train-step: param group '*.bias:momentum=0.9': unknown setting 'momentum' (weight-decay, lr-scale, beta1, beta2, eps for adam)
// BETA-RANGE: error: fsdp-build-train-step: param group '*.bias:beta2=1': 'beta2=1' needs a number in [0, 1)
// NO-BUFFER: error: fsdp-build-train-step: param group '*.bias:momentum=0': a group's momentum must be non-zero exactly when the optimizer's is (momentum buffers are kept for every parameter or none)
// NEW-BUFFER: error: fsdp-build-train-step: param group '*.bias:momentum=0.9': a group's momentum must be non-zero exactly when the optimizer's is
// NESTEROV: error: fsdp-build-train-step: param group '*.bias:dampening=0.1': nesterov needs zero dampening
