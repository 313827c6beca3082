// A 3-layer perceptron: Linear(16, 32) -> ReLU -> Linear(32, 32) -> ReLU ->
// Linear(32, 4), trained on a (8, 16) batch against (8, 4) targets with the
// mean squared error. 1732 parameters; initializers are nn.Linear's defaults.
fsdp.model @mlp {
  fsdp.module @root kind "MLP" {
    fsdp.module @fc1 kind "Linear" {
      fsdp.param @weight : tensor<32x16xf32> init <kaiming_uniform(2.23606797749979)>
      fsdp.param @bias : tensor<32xf32> init <uniform(-0.25, 0.25)>
      fsdp.forward (%x: tensor<8x16xf32>) -> tensor<8x32xf32> {
        %w = fsdp.get_param @weight : tensor<32x16xf32>
        %b = fsdp.get_param @bias : tensor<32xf32>
        %y = nn.linear %x, %w, %b : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<8x32xf32>
        fsdp.return %y : tensor<8x32xf32>
      }
    }
    fsdp.module @fc2 kind "Linear" {
      fsdp.param @weight : tensor<32x32xf32> init <kaiming_uniform(2.23606797749979)>
      fsdp.param @bias : tensor<32xf32> init <uniform(-0.17677669529663687, 0.17677669529663687)>
      fsdp.forward (%x: tensor<8x32xf32>) -> tensor<8x32xf32> {
        %w = fsdp.get_param @weight : tensor<32x32xf32>
        %b = fsdp.get_param @bias : tensor<32xf32>
        %y = nn.linear %x, %w, %b : (tensor<8x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
        fsdp.return %y : tensor<8x32xf32>
      }
    }
    fsdp.module @fc3 kind "Linear" {
      fsdp.param @weight : tensor<4x32xf32> init <kaiming_uniform(2.23606797749979)>
      fsdp.param @bias : tensor<4xf32> init <uniform(-0.17677669529663687, 0.17677669529663687)>
      fsdp.forward (%x: tensor<8x32xf32>) -> tensor<8x4xf32> {
        %w = fsdp.get_param @weight : tensor<4x32xf32>
        %b = fsdp.get_param @bias : tensor<4xf32>
        %y = nn.linear %x, %w, %b : (tensor<8x32xf32>, tensor<4x32xf32>, tensor<4xf32>) -> tensor<8x4xf32>
        fsdp.return %y : tensor<8x4xf32>
      }
    }
    fsdp.forward (%x: tensor<8x16xf32>, %target: tensor<8x4xf32>) -> tensor<f32> {
      %0 = fsdp.call @fc1(%x) : (tensor<8x16xf32>) -> tensor<8x32xf32>
      %1 = nn.relu %0 : tensor<8x32xf32>
      %2 = fsdp.call @fc2(%1) : (tensor<8x32xf32>) -> tensor<8x32xf32>
      %3 = nn.relu %2 : tensor<8x32xf32>
      %4 = fsdp.call @fc3(%3) : (tensor<8x32xf32>) -> tensor<8x4xf32>
      %loss = nn.mse_loss %4, %target : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
