// A function whose C name would be the library's signature table.
func.func @signatures(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
