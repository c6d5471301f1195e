-- Missing Fashion-MNIST files: the message names the files, where they were looked for,
-- and the Debian package to install.
local tpu = require "tpu"
tpu.data.fashion_mnist("train", {dir = "no_such_directory"})
