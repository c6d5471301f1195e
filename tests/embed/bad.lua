local tpu = require "tpu"

local a = tpu.ones {2, 3}
print(a:matmul(tpu.ones {2, 3}))
