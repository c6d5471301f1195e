-- Tests of model:export's errors and file (tests/export checks the exported graphs' values).
local tpu = require "tpu"
local check = require "check"
local files = require "files"
local pb = require "tpu.nn.protobuf"
local nn = tpu.nn

local T = {}

local function mlp()
  return nn.Sequential {nn.Input {shape = {4}}, nn.Dense(3, {activation = "relu"}), nn.Dense(2)}
end

function T.protobuf_varints()
  check.eq(pb.varint(0), "\0")
  check.eq(pb.varint(1), "\1")
  check.eq(pb.varint(300), "\xac\x02")
  check.eq(pb.varint(-1), ("\xff"):rep(9) .. "\1")  -- int64 two's complement: ten bytes
  check.eq(pb.int(1, 7), "\x08\x07")
  check.eq(pb.string(2, "ab"), "\x12\x02ab")
  check.eq(pb.float(2, 1.5), "\x15" .. string.pack("<f", 1.5))
  check.eq(pb.ints(8, {1, 2}), "\x40\x01\x40\x02")
end

function T.export_writes_an_onnx_model_deterministically()
  local dir = files.tmpdir()
  local model = mlp()
  model:export(dir .. "/a.onnx")
  model:export(dir .. "/b.onnx")
  local a = files.must_read(dir .. "/a.onnx")
  check.eq(a:sub(1, 2), "\x08\x07")  -- ir_version 7
  check.is_true(a:find("tputrain", 1, true) ~= nil, "the producer")
  check.eq(a == files.must_read(dir .. "/b.onnx"), true, "the same model gives the same bytes")
  files.rmdir(dir)
end

function T.a_custom_layer_is_an_error_naming_it()
  local Scale = nn.Module:extend("Scale")
  function Scale:call(x, _ctx) return x * 2 end
  local model = nn.Sequential {nn.Input {shape = {4}}, nn.Dense(3), Scale {name = "my_scale"}}
  local err = check.raises(function() model:export("never_written.onnx") end,
    "model:export: Scale 'my_scale' %(built at [%w_./%-]*test_export%.lua:%d+%)")
  check.is_true(err:match("^[%w_./%-]*test_export%.lua:%d+: ") ~= nil,
    "the error names the user's line: " .. err)
  check.is_true(err:find("the exportable layers are Activation, Add,", 1, true) ~= nil, err)
end

function T.a_custom_layer_exports_with_its_export_onnx()
  local Scale = nn.Module:extend("Scale")
  function Scale:call(x, _ctx) return x * 2 end
  local seen
  function Scale:export_onnx(onnx, x, out_shape)
    seen = {x.shape, out_shape}
    return onnx:op("Mul", {x, onnx:constant(2)}, nil, out_shape)
  end
  local model = nn.Sequential {nn.Input {shape = {4}}, nn.Dense(3), Scale {name = "my_scale"}}
  local dir = files.tmpdir()
  model:export(dir .. "/scale.onnx")
  local bytes = files.must_read(dir .. "/scale.onnx")
  check.eq(seen, {{-1, 3}, {-1, 3}})
  check.is_true(bytes:find("my_scale/Mul", 1, true) ~= nil, "the node is named after the layer")
  files.rmdir(dir)
end

function T.export_onnx_must_return_a_value()
  local Bad = nn.Module:extend("Bad")
  function Bad:call(x, _ctx) return x end
  function Bad:export_onnx(_onnx, _x) return 42 end
  local model = nn.Sequential {nn.Input {shape = {4}}, Bad {name = "bad"}}
  check.raises(function() model:export("never_written.onnx") end,
    "model:export: Bad 'bad' %(built at [%w_./%-]*test_export%.lua:%d+%) export_onnx returned 42, not a graph value")
  function Bad:export_onnx(onnx, x) return onnx:op("Relu", {x.name}, nil, x.shape) end
  check.raises(function() model:export("never_written.onnx") end,
    "Bad 'bad' %(built at [%w_./%-]*test_export%.lua:%d+%): expected a graph value, got \"[%w_]+\"")
end

function T.a_layer_inside_a_nested_model_is_named()
  local Twice = nn.Module:extend("Twice")
  function Twice:call(x, _ctx) return x * 2 end
  local x = nn.Input {shape = {6, 8}}
  local inner = nn.Sequential {nn.Dense(8), Twice {name = "twice"}}
  local model = nn.Model {inputs = x, outputs = nn.Dense(2)(inner(x))}
  check.raises(function() model:export("never_written.onnx") end,
    "model:export: Twice 'twice' %(built at [%w_./%-]*test_export%.lua:%d+%)")
end

function T.a_custom_activation_is_an_error_naming_the_layer()
  local model = nn.Sequential {nn.Input {shape = {4}},
    nn.Dense(3, {activation = function(x) return x * 2 end, name = "doubled"})}
  check.raises(function() model:export("never_written.onnx") end,
    "Dense 'doubled' %(built at [%w_./%-]*test_export%.lua:%d+%) has a custom %(function%) activation")
end

function T.an_unbuilt_model_is_an_error()
  local model = nn.Sequential {nn.Dense(3)}
  check.raises(function() model:export("never_written.onnx") end,
    "^[%w_./%-]*test_export%.lua:%d+: model:export: Sequential '[%w_]+' is not built")
end

function T.bad_and_unwritable_paths()
  local model = mlp()
  check.raises(function() model:export(42) end, "model:export: expected a file path, got 42")
  check.raises(function() model:export("m.onnx", {}) end, "bad argument #2 to 'export'")
  check.raises(function() model:export("no_such_dir/m.onnx") end,
    "^[%w_./%-]*test_export%.lua:%d+: cannot write no_such_dir/m.onnx: "
    .. "the directory no_such_dir does not exist")
end

return T
