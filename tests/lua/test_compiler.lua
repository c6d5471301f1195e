-- The compile pipeline: results are bitwise the same with and without it; fusion and
-- planning make fewer kernels and a smaller plan; donation consumes arguments.
local tpu = require "tpu"
local check = require "check"
local files = require "files"

local function mlp_problem()
  local k = tpu.random.key(3)
  local ks = k:split(4)
  -- w1, b1, w2, b2 (optimizers take lists)
  local params = {tpu.random.normal(ks[1], {20, 32}) * 0.3, tpu.zeros{32}, tpu.random.normal(ks[2], {32, 5}) * 0.3,
                  tpu.zeros{5}}
  local x = tpu.random.normal(ks[3], {16, 20})
  local y = (tpu.random.uniform(ks[4], {16}) * 5):cast("i32")
  local function loss(p, xb, yb)
    local h = (xb:matmul(p[1]) + p[2]):relu()
    local logits = h:matmul(p[3]) + p[4]
    return -(logits:log_softmax() * yb:one_hot(5)):sum(-1):mean()
  end
  local opt = tpu.optim.Adam {lr = 1e-2}
  local function step(p, s, xb, yb)
    local l, g = tpu.value_and_grad(loss)(p, xb, yb)
    local p2, s2 = opt:update(p, g, s)
    return p2, s2, l
  end
  return params, opt:init(params), x, y, step
end

local function train(jit_opts, steps)
  local p, s, x, y, step = mlp_problem()
  local f = tpu.jit(step, jit_opts)
  local losses = {}
  for i = 1, steps do
    local l
    p, s, l = f(p, s, x, y)
    losses[i] = l:item()
  end
  return p, losses, f
end

-- Runs tests/lua/mlp_train_step.lua in a fresh interpreter with `flags`: its stdout (losses
-- and weight sums in hex) and the --profile line's kernels and planned peak in bytes.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local function profiled_run(flags)
  local out, err = files.tmpname(), files.tmpname()
  local cmd = string.format("%s %s --profile %s/mlp_train_step.lua >%s 2>%s", arg[-1] or "tputrain", flags, here, out, err)
  local ok = os.execute(cmd)
  local function slurp(path)
    local f = assert(io.open(path))
    local s = f:read("a")
    f:close()
    os.remove(path)
    return s
  end
  local stdout, stderr = slurp(out), slurp(err)
  check.is_true(ok, cmd .. " failed:\n" .. stderr)
  local kernels, planned, unit = stderr:match("'mlp_train_step' %b(): (%d+) kernels, [^,]+, planned ([%d.]+) (%a+)")
  check.is_true(kernels ~= nil, "no --profile line in:\n" .. stderr)
  local scale = {B = 1, KiB = 2 ^ 10, MiB = 2 ^ 20, GiB = 2 ^ 30}
  return stdout, tonumber(kernels), tonumber(planned) * scale[unit]
end

return {
  ["TPUTRAIN_DEBUG=2 prints the memory planner's stages, each with its time"] = function()
    local err = files.tmpname()
    check.is_true(os.execute(string.format("TPUTRAIN_DEBUG=2 %s %s/mlp_train_step.lua >/dev/null 2>%s",
                                           arg[-1] or "tputrain", here, err)))
    local f = assert(io.open(err))
    local text = f:read("a")
    f:close()
    os.remove(err)
    local stages = "liveness [%d.]+, schedule [%d.]+, lifetimes [%d.]+, donation [%d.]+, lock%-step reads [%d.]+, " ..
                   "offsets [%d.]+, steps [%d.]+, HBM [%d.]+\n"
    check.is_true(text:find("compile plan +[%d.]+ ms +%d+ nodes: " .. stages) ~= nil, text)
  end,

  ["--no-opt: --profile shows more kernels and a larger plan, and the same bits"] = function()
    local opt_out, opt_kernels, opt_planned = profiled_run("")
    local raw_out, raw_kernels, raw_planned = profiled_run("--no-opt")
    check.eq(opt_out, raw_out)
    check.is_true(opt_out:find("step 5 loss") ~= nil, opt_out)
    check.is_true(opt_kernels < raw_kernels, string.format("%d vs %d kernels", opt_kernels, raw_kernels))
    check.is_true(opt_planned < raw_planned, string.format("%.0f vs %.0f bytes planned", opt_planned, raw_planned))
  end,

  ["results are bitwise identical with and without the pipeline"] = function()
    local pa, la = train({optimize = false}, 12)
    local pb, lb = train({optimize = true}, 12)
    check.eq(la, lb)
    for k = 1, 4 do check.is_true(pa[k] == pb[k], "parameter " .. k) end
    check.is_true(la[12] < la[1], "the loss goes down")
  end,

  ["a fused reduce over an empty axis gives its starting value"] = function()
    -- The elementwise chain fuses into the reduce; an empty operand has no tiles to make.
    check.eq(tpu.jit(function(x) return (x * 2):sum(2) end)(tpu.zeros {3, 0}):totable(), {0, 0, 0})
    check.eq(tpu.jit(function(x) return (x * 2):max() end)(tpu.zeros {0}):item(), -math.huge)
    check.eq(tpu.jit(function(x) return (x + 1):min(1) end)(tpu.zeros {0, 2}):totable(), {math.huge, math.huge})
  end,

  ["an i32 sum of negations past the range is the same with and without the pipeline"] = function()
    -- An integer sum wraps modulo 2^32, as negation does: -3 * 2^30 wraps to 2^30.
    local x = tpu.tensor({1073741824, 1073741824, 1073741824}, {dtype = "i32"})
    local function f(v) return (-v):sum() end
    check.eq(tpu.jit(f)(x):item(), tpu.jit(f, {optimize = false})(x):item())
    check.eq(tpu.jit(f)(x):item(), 1073741824)
  end,

  ["the pipeline makes fewer kernels and a smaller plan"] = function()
    local p, s, x, y, step = mlp_problem()
    local plain = tpu.jit(step, {optimize = false}):info(p, s, x, y)
    local opt = tpu.jit(step):info(p, s, x, y)
    check.is_true(opt.kernels < plain.kernels, string.format("%d vs %d kernels", opt.kernels, plain.kernels))
    check.is_true(opt.planned_bytes < plain.planned_bytes,
      string.format("%d vs %d bytes", opt.planned_bytes, plain.planned_bytes))
  end,

  ["donated arguments are consumed and their buffers reused"] = function()
    local f = tpu.jit(function(w, g) return w - 0.5 * g end, {donate_argnums = 1, name = "update"})
    local w, g = tpu.tensor{1, 2}, tpu.tensor{2, 2}
    local w2 = f(w, g)
    check.eq(w2:totable(), {0, 1})
    check.eq(g:totable(), {2, 2})
    check.raises(function() return w + 1 end, "donated to jit 'update'")
    check.eq(tostring(w), "Tensor<donated to jit 'update'>")
  end,

  ["donating a tensor that shares its buffer leaves the other holders unchanged"] = function()
    -- An unshuffled batch is a view of its data set's rows; an argument may come twice.
    local f = tpu.jit(function(w, g) return w * 2 + g end, {donate_argnums = 1})
    local x = tpu.tensor {{1, 2}, {3, 4}, {5, 6}}
    local batch = tpu.data.from_tensors(x):batch(2):iter()()
    check.eq(f(batch, tpu.zeros {2, 2}):totable(), {{2, 4}, {6, 8}})
    check.eq(x:totable(), {{1, 2}, {3, 4}, {5, 6}})
    local w = tpu.tensor {1, 2}
    check.eq(f(w, w):totable(), {3, 6})
  end,
}
