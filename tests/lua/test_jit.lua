-- tpu.jit, tpu.grad, tpu.value_and_grad, tpu.cond and the rules of tracing.
local tpu = require "tpu"
local check = require "check"
local files = require "files"

return {
  ["jit compiles once per signature and hits the cache"] = function()
    local f = tpu.jit(function(x, y) return x * y + 1 end)
    local a = tpu.ones{2, 3}
    check.eq(f(a, a):totable(), {{2, 2, 2}, {2, 2, 2}})
    f(a, a)
    f(a * 2, a)
    check.eq(f:stats().compiles, 1)
    check.eq(f:stats().cache_hits, 2)
    f(tpu.ones{4}, tpu.ones{4})
    check.eq(f:stats().compiles, 2)
  end,

  ["the collector stops while tracing, and restarts when the trace's heap outgrows its limit"] = function()
    local running
    local f = tpu.jit(function(x)
      running = collectgarbage("isrunning")
      return x + 1
    end)
    f(tpu.ones{2})
    check.eq(running, false)
    check.eq(collectgarbage("isrunning"), true)
    -- 300 MiB of garbage (more than the 256 MiB the trace may add), then enough traced values
    -- for the trace to look at the heap.
    local g = tpu.jit(function(x)
      for i = 1, 300 do local _ = string.rep("x", 1 << 20, tostring(i)) end
      for _ = 1, 5000 do x = x + 1 end
      running = collectgarbage("isrunning")
      return x
    end)
    check.eq(g(tpu.zeros{2}):totable(), {5000, 5000})
    check.eq(running, true)
    -- A collector the script stopped stays stopped.
    collectgarbage("stop")
    f(tpu.ones{3})
    check.eq(collectgarbage("isrunning"), false)
    collectgarbage("restart")
  end,

  ["a traced op is placed at the user's line that made it, else at the line that called the trace"] = function()
    local here = debug.getinfo(1, "l").currentline
    local f = tpu.jit(function(x, y)
      local d = x - y
      local loss = tpu.losses.mse(x, y)  -- the loss's ops are the library's, called from here
      return d, loss
    end)
    local mse = tpu.jit(tpu.losses.mse)  -- no frame of the user's inside this trace
    local a = tpu.ones {4}
    f(a, a * 2)
    mse(a, a * 3)
    local other = tpu.jit(function(x, y) return tpu.losses.mse(x, y) end)  -- a tail call: no frame
    other(a, a)
    local co = tpu.jit(function(x)
      return coroutine.wrap(function() return x * 3 end)(), tpu.losses.mse(x, x + 1)
    end)
    co(a)
    local function lines(fn)
      local seen = {}
      for line in fn.last.exe:text():gmatch("# [^\n]*test_jit%.lua:(%d+)") do seen[tonumber(line) - here] = true end
      return seen
    end
    check.eq(lines(f), {[2] = true, [3] = true})
    check.eq(lines(mse), {[9] = true})
    check.eq(lines(other), {[11] = true})
    check.eq(lines(co), {[13] = true})
  end,

  ["jit takes and returns nested tables; non-tensor leaves are static"] = function()
    local calls = 0
    local f = tpu.jit(function(p, scale)
      calls = calls + 1
      return {sum = p.a + p.b[1], scaled = p.a * scale}, scale
    end)
    local r, s = f({a = tpu.ones{2}, b = {tpu.ones{2}}}, 3)
    check.eq(r.sum:totable(), {2, 2})
    check.eq(r.scaled:totable(), {3, 3})
    check.eq(s, 3)
    f({a = tpu.ones{2}, b = {tpu.ones{2}}}, 4)
    check.eq(calls, 2)
  end,

  ["grad of a simple function"] = function()
    local g = tpu.grad(function(x) return (x * x):sum() end)
    check.eq(g(tpu.tensor{1, 2, 3}):totable(), {2, 4, 6})
    local vg = tpu.value_and_grad(function(w, x) return (w * x):sum() end, {argnums = {1, 2}})
    local v, grads = vg(tpu.tensor{1, 2}, tpu.tensor{3, 4})
    check.eq(v:item(), 11)
    check.eq(grads[1]:totable(), {3, 4})
    check.eq(grads[2]:totable(), {1, 2})
  end,

  ["grad over a table of tensors, with aux, inside jit"] = function()
    local function loss(p, x) local y = x:matmul(p.w) + p.b; return (y * y):mean(), y end
    local step = tpu.jit(function(p, x)
      local l, y, g = tpu.value_and_grad(loss, {has_aux = true})(p, x)
      return l, y, {w = p.w - 0.1 * g.w, b = p.b - 0.1 * g.b}
    end)
    local p = {w = tpu.ones{3, 2}, b = tpu.zeros{2}}
    local x = tpu.tensor{{1, 0, 0}, {0, 1, 1}}
    local l, y, p2 = step(p, x)
    check.eq(y.shape, {2, 2})
    -- y = [[1,1],[2,2]], l = (1+1+4+4)/4 = 2.5; dl/dy = y/2; dl/db = sum rows = [1.5, 1.5]
    check.near(l:item(), 2.5, 1e-6)
    check.near(p2.b:totable(), {-0.15, -0.15}, 1e-6)
  end,

  ["a branch on a traced value is rule 1, with the user's line"] = function()
    local f = tpu.jit(function(x) if x:sum() > 0 then return x end return -x end, {name = "branchy"})
    local msg = check.raises(function() f(tpu.ones{3}) end, "data%-dependent condition on a traced f32%[%] value inside jit 'branchy'")
    check.is_true(msg:find("test_jit.lua:%d+:") ~= nil, msg)
    check.is_true(msg:find("tpu.where", 1, true) ~= nil and msg:find("tpu.cond", 1, true) ~= nil, msg)
    check.raises(function() tpu.jit(function(x) return x:item() end)(tpu.ones{1}) end, "item%(%) on")
    check.raises(function() tpu.jit(function(x) return x:totable() end)(tpu.ones{1}) end, "totable%(%) on")
    msg = check.raises(function() tpu.jit(function(x) return x * tonumber(x:sum()) end)(tpu.ones{1}) end,
      "data%-dependent value read from a traced f32%[%] value")
    check.is_true(msg:find("test_jit.lua:%d+:") ~= nil and msg:find("tonumber() on", 1, true) ~= nil, msg)
    -- the failed trace leaves nothing behind: eager code still works
    check.eq((tpu.ones{2} + 1):totable(), {2, 2})
  end,

  ["a traced value that escapes its trace is an error"] = function()
    local leaked
    local f = tpu.jit(function(x) leaked = x; return x + 1 end)
    f(tpu.ones{2})
    check.raises(function() return leaked + 1 end, "outside the tpu.jit call")
  end,

  ["tpu.cond and tpu.where inside jit"] = function()
    local f = tpu.jit(function(x)
      return tpu.cond(x:sum():gt(0), function(v) return v * 2 end, function(v) return -v end, x)
    end)
    check.eq(f(tpu.tensor{1, 2}):totable(), {2, 4})
    check.eq(f(tpu.tensor{-1, -2}):totable(), {1, 2})
    check.eq(tpu.cond(true, function() return 1 end, function() return 2 end), 1)
  end,

  ["a call and f:lower share one cache; only calls count hits and runs"] = function()
    local f = tpu.jit(function(x) return x + 1 end)
    local x = tpu.ones {3}
    f:lower(x)
    f(x)
    f:info(x)
    f(x)
    check.eq(f:stats().compiles, 1)
    check.eq(f:stats().cache_hits, 2)
    check.eq(f:stats().executions, 2)
    f:lower(tpu.shape_dtype {5})
    check.eq(f:stats().compiles, 2)
    check.eq(f:stats().cache_hits, 2)
  end,

  ["lower, info and dump without arguments take the signature compiled last"] = function()
    local f = tpu.jit(function(x) return x * 2 end, {name = "twice"})
    f(tpu.ones {3})
    f(tpu.ones {2, 5})
    check.is_true(f:lower():find("f32[2,5]", 1, true) ~= nil, f:lower())
    check.eq(f:info().nodes, f:info(tpu.ones {2, 5}).nodes)
    local path = files.tmpname()
    f:dump(path)
    local file = io.open(path)
    local dot = file:read("a")
    file:close()
    os.remove(path)
    check.is_true(dot:find("digraph", 1, true) ~= nil and dot:find("2,5", 1, true) ~= nil, dot)
    check.eq(f:stats().compiles, 2)
    local g = tpu.jit(function() return tpu.ones {2} end)  -- no arguments: compiled on first use
    check.is_true(g:lower():find("f32[2]", 1, true) ~= nil, g:lower())
  end,

  ["kernel times name each kernel's place, its first run apart"] = function()
    local f = tpu.jit(function(a, b) return a:matmul(b) end, {name = "timed"})
    local a, b = tpu.ones {4, 3}, tpu.ones {3, 5}
    tpu.core.set_op_profiling(true)
    for _ = 1, 3 do f(a, b) end
    tpu.core.set_op_profiling(false)
    local line = debug.getinfo(1, "l").currentline - 5  -- the line that built f
    local found
    for _, k in ipairs(tpu.core.kernel_times()) do
      if k.where:find("test_jit.lua:" .. line, 1, true) and k.op == "dot" then found = k end
    end
    check.is_true(found ~= nil, "no dot kernel at test_jit.lua:" .. line)
    check.eq({found.type, found.calls}, {"f32[4,5]", 2})
    check.is_true(found.first_seconds > 0 and found.seconds > 0)
  end,

  ["lower returns graph text that names the user's lines"] = function()
    local f = tpu.jit(function(x) return x:exp():sum() end, {name = "lowered"})
    local text = f:lower(tpu.ones{4})
    check.is_true(text:find("graph lowered", 1, true) ~= nil, text)
    check.is_true(text:find("= exp f32[4] %0", 1, true) ~= nil, text)
    check.is_true(text:find("# [^\n]*test_jit.lua:%d+") ~= nil, text)
  end,

  ["signatures tell lists from tables with other keys, and shapes and dtypes apart"] = function()
    check.eq(tpu.core.type_key(tpu.ones {2, 3}), "f32[2,3]")
    check.eq(tpu.core.type_key(tpu.tensor(1, {dtype = "i32"})), "i32[]")
    local f = tpu.jit(function(t) local s = 0 for _, v in pairs(t) do s = s + v:sum() end return s end)
    local a, b = tpu.ones {2}, tpu.ones {3}
    f {a, b}
    f {a, b}
    check.eq(f:stats().compiles, 1)
    f {x = a, y = b}
    f {[1] = a, [3] = b}
    f {b, a}
    f {a:cast("i32"), b}
    check.eq(f:stats().compiles, 5)
    check.eq(f:stats().cache_hits, 1)
  end,

  ["flatten is core.signature's walk: its key text, and a spec that rebuilds the tree"] = function()
    local jit = require "tpu.jit"
    local t, u = tpu.ones {2, 3}, tpu.zeros({4}, {dtype = "i32"})
    local shape_dtype = getmetatable(tpu.shape_dtype {1})
    local key1 = tpu.random.key(1)
    local trees = {
      {table.pack(t, {t, u}, nil, 3, "x"),  -- a packed argument list with a hole
       "{ 1= f32[2,3] 2= [2 f32[2,3] i32[4] ] 4= number:3 5= string:x n= number:5 }"},
      {{a = t, b = {u, {c = t}}, [1] = u, [2.5] = "s", [-1] = false, [true] = 1},
       "{ true= number:1 -1= boolean:false 1= i32[4] 2.5= string:s a= f32[2,3] b= [2 i32[4] { c= f32[2,3] } ] }"},
      {{t, nil, u}, "{ 1= f32[2,3] 3= i32[4] }"}, {{}, "[0 ]"}, {{{}, {{}}}, "[2 [0 ] [1 [0 ] ] ]"},
      {{1, 2, x = 3}, "{ 1= number:1 2= number:2 x= number:3 }"},
      {{z = 1, a = 2, m = {3}}, "{ a= number:2 m= [1 number:3 ] z= number:1 }"},
      {key1, "tpu.random.Key< [1 i32[2] ] >"},
      {{k = key1, s = tpu.shape_dtype({4, 5}, "bf16")}, "{ k= tpu.random.Key< [1 i32[2] ] > s= bf16[4,5] }"},
    }
    local function same(a, b, path)  -- an object with a tree protocol comes back a new one
      local mt = getmetatable(a)
      if mt and mt.__tpu_tree then return check.is_true(getmetatable(b) == mt, path) end
      if type(a) ~= "table" or mt then return check.is_true(rawequal(a, b), path) end
      check.eq(type(b), "table", path)
      for k, v in pairs(a) do same(v, b[k], path .. "." .. tostring(k)) end
      for k in pairs(b) do check.is_true(a[k] ~= nil, path .. ": extra key " .. tostring(k)) end
    end
    for i, case in ipairs(trees) do
      local v, want = case[1], case[2]
      local leaves, spec, key = jit.flatten(v)
      local c_leaves, c_key, traced, shape_only = tpu.core.signature(v, shape_dtype)
      check.eq(key, want, "tree " .. i)
      check.eq(c_key, key, "tree " .. i)
      check.eq(#c_leaves, #leaves, "tree " .. i)
      for j = 1, #leaves do check.is_true(rawequal(c_leaves[j], leaves[j]), "tree " .. i .. ", leaf " .. j) end
      check.eq(traced, false)
      check.eq(shape_only, i == #trees)
      same(v, jit.unflatten(spec, leaves), "tree " .. i)
    end
    local seen
    tpu.jit(function(x)
      seen = table.pack(tpu.core.signature({x, t}, shape_dtype))
      return x
    end)(t)
    check.eq(seen[2], "[2 f32[2,3] f32[2,3] ]")
    check.eq(seen[3], true, "a traced leaf")
    local f = tpu.jit(function(w) return w * 2 end, {donate_argnums = 1, name = "twice"})
    local w = tpu.ones {2}
    f(w)
    check.raises(function() return f(w) end, "donated to jit 'twice'")
  end,

  -- The HBM report labels only the buffers it shows (a fit step has tens of thousands of
  -- leaves): a leaf of a table argument by its number in it.
  ["the HBM report names a table argument's leaf by its number"] = function()
    local f = tpu.jit(function(params, x) return x:matmul(params[2]:transpose()) + params[1]:sum() end, {name = "big"})
    local params = {tpu.shape_dtype {2}, tpu.shape_dtype {1 << 17, 1 << 17}}  -- 64 GiB: more than a core
    check.raises(function() f:info(params, tpu.shape_dtype {8, 1 << 17}) end,
      "64.00 GiB  argument 1 (params), tensor 2 of 2\n")
  end,

  -- The HBM advice probes smaller batches of the largest argument's leading dimension. When that
  -- dimension is no batch (here a weight's rows, which the matmul ties to x), the report stays
  -- the error and says how to name the batch.
  ["the HBM report stands when its batch advice cannot probe"] = function()
    local f = tpu.jit(function(w, x) return x:matmul(w) end, {name = "mm"})
    local err = check.raises(function() f:info(tpu.shape_dtype {1 << 17, 1 << 17}, tpu.shape_dtype {8, 1 << 17}) end,
      "ResourceExhausted: 'mm' needs")
    check.is_true(err:find("64.00 GiB  argument 1 (w)", 1, true) ~= nil, err)
    check.is_true(err:find("No batch advice: [^\n]*batch_argnums", 1) ~= nil, err)
  end,

  -- When even a batch of 1 does not fit, the advice names the version that holds it the way
  -- that changes the version (a strategy's version= wins over --tpu), or says none does.
  ["the HBM advice names a version that holds the step, or says none does"] = function()
    local g = tpu.jit(function(x, w) return x:matmul(w):sum() end, {name = "mm", batch_argnums = 1})
    local function advice(strategy, w_rows)
      local _ <close> = strategy:scope()
      local err = check.raises(function() g:info(tpu.shape_dtype {8, w_rows}, tpu.shape_dtype {w_rows, w_rows}) end,
        "ResourceExhausted: 'mm' needs")
      return err:match("Even a batch of 1[^\n]*")
    end
    -- 37.29 GiB: more than v4's 32 GiB, the most a core has
    local none = advice(tpu.strategy.TPU {version = "v4"}, 100000)
    check.is_true(none:find("no TPU version has that much HBM", 1, true) ~= nil, none)
    check.is_true(none:find("--tpu", 1, true) == nil, none)
    -- 9.31 GiB: over v2's 8 GiB; v3 holds it. A strategy's version= is not the option's.
    local set = advice(tpu.strategy.TPU {cores = 2, version = "v2"}, 50000)
    check.is_true(set:find('TPU{version="v3"}', 1, true) ~= nil, set)
    local device = require "tpu.device"
    local previous = device.version()
    device.set_version("v2")
    local ok, flag = pcall(advice, tpu.strategy.default(), 50000)
    device.set_version(previous)
    check.is_true(ok, flag)
    check.is_true(flag:find("(--tpu v3)", 1, true) ~= nil, flag)
  end,

  -- batch_argnums names the arguments that carry the batch: the profile's per-core batch advice
  -- and the HBM advice look there, not at the largest argument (a weight, e.g. an embedding).
  batch_argnums_name_the_batch = function()
    local function step(w, x) return x:matmul(w:transpose()) end
    local w, x = tpu.zeros {100, 4}, tpu.zeros {3, 4}
    local guess = tpu.jit(step)
    guess(w, x)
    check.eq(guess.last.batch, 100)
    local named = tpu.jit(step, {batch_argnums = 2})
    named(w, x)
    check.eq(named.last.batch, 3)
    check.raises(function() tpu.jit(step, {batch_argnums = "x"}) end,
      'jit: batch_argnums must be an argument number or a list of them, got "x"')
    -- fit's steps name theirs: the largest weight has 50 rows, the batches 4
    local nn = tpu.nn
    local model = nn.Sequential {nn.Embedding(50, 8), nn.Flatten(), nn.Dense(2)}
    model:compile {optimizer = "sgd", loss = "sparse_categorical_crossentropy"}
    model:fit(tpu.zeros({8, 3}, {dtype = "i32"}), tpu.zeros({8}, {dtype = "i32"}), {batch_size = 4, verbose = 0})
    check.eq(model.compiled.steps.train.last.batch, 4)
  end,

  -- The profile's advice on feature dimensions says which the data fixes (input features, also
  -- flattened) and does not ask to change those.
  advice_tells_data_sizes_from_chosen_widths = function()
    local advisor = require "tpu.advisor"
    local f = tpu.jit(function(x, w1, w2) return x:reshape {4, 12}:matmul(w1):matmul(w2) end, {batch_argnums = 1})
    f(tpu.zeros {4, 3, 4}, tpu.zeros {12, 100}, tpu.zeros {100, 10})
    check.eq(f.last.data_dims, {[3] = true, [4] = true, [12] = true})
    local lines = advisor.advice(f.last.exe:nodes(), f.last.batch, 1, f.last.data_dims)
    local text = table.concat(lines, "\n")
    check.is_true(text:find("dimension 12 [^\n]*the data has this size", 1) ~= nil, text)
    check.is_true(text:find("dimension 100 [^\n]*a width you choose", 1) ~= nil, text)
  end,
}
