-- A syntax error is reported as Lua reports it, with the file and line, and exit status 1.
local tpu = require "tpu"
local x = tpu.ones {2}
print(x +)
