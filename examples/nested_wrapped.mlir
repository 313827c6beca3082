// NestedWrappedModule of PyTorch's FSDP tests
// (torch/testing/_internal/common_fsdp.py), with its manual wrapping:
//
//   self.module = nn.Sequential(
//       Linear(8, 4),                                         #  36 params
//       wrap(nn.Sequential(wrap(Linear(4, 16)),               #  80
//                          Linear(16, 16))),                  # 272
//       wrap(Linear(16, 4)),                                  #  68
//       Linear(4, 8))                                         #  40 -> 496
//
// plus the top-level FSDP that _test_fsdp_parity adds: 4 units, the root
// owning module.0 and module.3 (76 params). Input: a (4, 8) batch; loss:
// output.sum(). Initializers are nn.Linear's defaults.
fsdp.model @nested_wrapped {
  fsdp.module @root kind "NestedWrappedModule" unit {
    fsdp.module @module kind "Sequential" {
      fsdp.module @"0" kind "Linear" {
        fsdp.param @weight : tensor<4x8xf32> init <kaiming_uniform(2.23606797749979)>
        fsdp.param @bias : tensor<4xf32> init <uniform(-0.35355339059327373, 0.35355339059327373)>
        fsdp.forward (%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
          %w = fsdp.get_param @weight : tensor<4x8xf32>
          %b = fsdp.get_param @bias : tensor<4xf32>
          %y = nn.linear %x, %w, %b : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x4xf32>
          fsdp.return %y : tensor<4x4xf32>
        }
      }
      fsdp.module @"1" kind "Sequential" unit {
        fsdp.module @"0" kind "Linear" unit {
          fsdp.param @weight : tensor<16x4xf32> init <kaiming_uniform(2.23606797749979)>
          fsdp.param @bias : tensor<16xf32> init <uniform(-0.5, 0.5)>
          fsdp.forward (%x: tensor<4x4xf32>) -> tensor<4x16xf32> {
            %w = fsdp.get_param @weight : tensor<16x4xf32>
            %b = fsdp.get_param @bias : tensor<16xf32>
            %y = nn.linear %x, %w, %b : (tensor<4x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<4x16xf32>
            fsdp.return %y : tensor<4x16xf32>
          }
        }
        fsdp.module @"1" kind "Linear" {
          fsdp.param @weight : tensor<16x16xf32> init <kaiming_uniform(2.23606797749979)>
          fsdp.param @bias : tensor<16xf32> init <uniform(-0.25, 0.25)>
          fsdp.forward (%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
            %w = fsdp.get_param @weight : tensor<16x16xf32>
            %b = fsdp.get_param @bias : tensor<16xf32>
            %y = nn.linear %x, %w, %b : (tensor<4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
            fsdp.return %y : tensor<4x16xf32>
          }
        }
        fsdp.forward (%x: tensor<4x4xf32>) -> tensor<4x16xf32> {
          %0 = fsdp.call @"0"(%x) : (tensor<4x4xf32>) -> tensor<4x16xf32>
          %1 = fsdp.call @"1"(%0) : (tensor<4x16xf32>) -> tensor<4x16xf32>
          fsdp.return %1 : tensor<4x16xf32>
        }
      }
      fsdp.module @"2" kind "Linear" unit {
        fsdp.param @weight : tensor<4x16xf32> init <kaiming_uniform(2.23606797749979)>
        fsdp.param @bias : tensor<4xf32> init <uniform(-0.25, 0.25)>
        fsdp.forward (%x: tensor<4x16xf32>) -> tensor<4x4xf32> {
          %w = fsdp.get_param @weight : tensor<4x16xf32>
          %b = fsdp.get_param @bias : tensor<4xf32>
          %y = nn.linear %x, %w, %b : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<4x4xf32>
          fsdp.return %y : tensor<4x4xf32>
        }
      }
      fsdp.module @"3" kind "Linear" {
        fsdp.param @weight : tensor<8x4xf32> init <kaiming_uniform(2.23606797749979)>
        fsdp.param @bias : tensor<8xf32> init <uniform(-0.5, 0.5)>
        fsdp.forward (%x: tensor<4x4xf32>) -> tensor<4x8xf32> {
          %w = fsdp.get_param @weight : tensor<8x4xf32>
          %b = fsdp.get_param @bias : tensor<8xf32>
          %y = nn.linear %x, %w, %b : (tensor<4x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<4x8xf32>
          fsdp.return %y : tensor<4x8xf32>
        }
      }
      fsdp.forward (%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
        %0 = fsdp.call @"0"(%x) : (tensor<4x8xf32>) -> tensor<4x4xf32>
        %1 = fsdp.call @"1"(%0) : (tensor<4x4xf32>) -> tensor<4x16xf32>
        %2 = fsdp.call @"2"(%1) : (tensor<4x16xf32>) -> tensor<4x4xf32>
        %3 = fsdp.call @"3"(%2) : (tensor<4x4xf32>) -> tensor<4x8xf32>
        fsdp.return %3 : tensor<4x8xf32>
      }
    }
    // Loss as in the test: output.sum().
    fsdp.forward (%x: tensor<4x8xf32>) -> tensor<f32> {
      %y = fsdp.call @module(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
