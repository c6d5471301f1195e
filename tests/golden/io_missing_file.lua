-- Loading a file that is not there says so, with the user's line.
local tpu = require "tpu"
local ckpt = require "tpu.checkpoint"
print("loading")
ckpt.load("no_such_checkpoint.safetensors")
