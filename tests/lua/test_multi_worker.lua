-- Multi-worker training under mpirun (OpenMPI): 2 ranks x 1 core end with weights bitwise
-- equal to 1 process x 2 cores, with a hand-written step and with fit; a rank that dies stops
-- the others within 60 s, named. Ranks that compiled different steps, or run different numbers
-- of them, stop within seconds, each saying what differs, with exit status 1 on every rank.
local tpu = require "tpu"
local check = require "check"
local files = require "files"

local here = arg[0]:match("^(.*)/[^/]*$") or "."
local script = here .. "/mpi/same_weights.lua"
local exe = arg[-1] or "tputrain"

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok, code
end

local function mpirun(extra, file)
  local root = io.popen("id -u"):read("l") == "0" and " --allow-run-as-root" or ""
  return string.format("timeout 90 mpirun%s --oversubscribe -np 2 %s %s %s", root, exe, file or script, extra or "")
end

-- Runs tests/lua/mpi/differ.lua (or `file`) on 2 ranks with `extra` arguments; returns per
-- rank (index rank + 1) {out=, err=, status=} and the seconds it took.
local function per_rank(extra, file)
  local dir = files.tmpdir()
  local rank_cmd = string.format("%s %s %s >%s/out.$OMPI_COMM_WORLD_RANK 2>%s/err.$OMPI_COMM_WORLD_RANK; echo $? >%s/status.$OMPI_COMM_WORLD_RANK",
    exe, file or (here .. "/mpi/differ.lua"), extra, dir, dir, dir)
  local root = io.popen("id -u"):read("l") == "0" and " --allow-run-as-root" or ""
  local t0 = tpu.core.now()
  run(string.format("timeout 90 mpirun%s --oversubscribe -np 2 sh -c '%s'", root, rank_cmd))
  local took = tpu.core.now() - t0
  local ranks = {}
  for r = 0, 1 do
    local function slurp(name)
      local f = io.open(string.format("%s/%s.%d", dir, name, r))
      local text = f and f:read("a") or ""
      if f then f:close() end
      return text
    end
    ranks[r + 1] = {out = slurp("out"), err = slurp("err"), status = tonumber(slurp("status"))}
  end
  os.execute("rm -r " .. dir)
  return ranks, took
end

-- "differ.lua:N:" where N is the line of its model:fit call, which the errors name.
local function at_fit()
  local n = 0
  for line in io.lines(here .. "/mpi/differ.lua") do
    n = n + 1
    if line:find("model:fit", 1, true) then return "differ.lua:" .. n .. ":" end
  end
end

-- Both ranks fail within seconds, each with `message` (a Lua pattern) on stderr.
local function both_fail(ranks, took, message, plain)
  check.is_true(took < 20, string.format("took %.1f s", took))
  for r, rank in ipairs(ranks) do
    check.eq(rank.status, 1, "rank " .. (r - 1) .. ": " .. rank.err)
    check.is_true(rank.err:find(message, 1, plain) ~= nil, "rank " .. (r - 1) .. ": " .. rank.err)
    check.is_true(not rank.err:find("MPI_ERR") and not rank.err:find("died"), rank.err)
  end
end

local function usable()
  return tpu.core.mpi_available() and os.execute("command -v mpirun >/dev/null 2>&1")
end

return {
  ["2 workers x 1 core give the same weights as 1 process x 2 cores"] = function()
    if not usable() then return print("skipped: no MPI") end
    local single = run(exe .. " " .. script .. " single")
    local multi = run(mpirun())
    local a = single:match("weights [^\n]*")
    local b = multi:match("weights [^\n]*")
    check.is_true(a ~= nil, single)
    check.eq(b, a, multi)
    local _, count = multi:gsub("weights ", "")
    check.eq(count, 1, "only rank 0 prints")
  end,

  ["fit on 2 workers x 1 core ends with the weights of 1 process x 2 cores"] = function()
    if not usable() then return print("skipped: no MPI") end
    local fit_script = here .. "/fit_weights.lua"  -- BatchNorm, Dropout, Adam, a padded batch
    local single = run(exe .. " " .. fit_script .. " 2"):match("weights [^\n]*")
    local multi = run(mpirun("multi", fit_script))  -- mpirun may add warnings of its own
    check.is_true(single ~= nil, "no weights line from the single process")
    check.eq(multi:match("weights [^\n]*"), single, multi)
    local _, count = multi:gsub("weights ", "")
    check.eq(count, 1, "only rank 0 prints")
  end,

  -- It summed this rank's replicas only: rank 0 printed 6 and rank 1 22 for 28.
  ["strategy:reduce combines the replicas of every rank"] = function()
    if not usable() then return print("skipped: no MPI") end
    local ranks = per_rank("", here .. "/mpi/reduce.lua")
    for r, rank in ipairs(ranks) do
      check.eq(rank.status, 0, "rank " .. (r - 1) .. ": " .. rank.err)
      check.eq(rank.err, "sum 28 mean 7\nwide 5000 4 4\n", "rank " .. (r - 1))
    end
  end,

  ["ranks that build different activations stop before the first step, saying where"] = function()
    if not usable() then return print("skipped: no MPI") end
    local ranks, took = per_rank("activation")
    both_fail(ranks, took, at_fit():gsub("%.", "%%.") .. " multi_worker: ranks differ: rank 1 compiled step 'train_step' with graph line %d+: "
      .. "[^\n]*tanh[^\n]*, rank 0 compiled graph line %d+: ")
    check.eq(ranks[1].out, "", "nothing trained")
  end,

  ["ranks whose parameters differ in size stop with both shapes, not an MPI truncation"] = function()
    if not usable() then return print("skipped: no MPI") end
    local ranks, took = per_rank("size")
    both_fail(ranks, took, at_fit() .. " multi_worker: ranks differ: rank 1 compiled step 'train_step' with "
      .. "argument 1 (tparams), tensor 1 of 4 f32[8,32], rank 0 compiled argument 1 (tparams), tensor 1 of 4 f32[8,16]\n", true)
  end,

  ["ranks that fit for different epochs stop at once, and none is reported dead"] = function()
    if not usable() then return print("skipped: no MPI") end
    local ranks, took = per_rank("epochs")
    both_fail(ranks, took, at_fit() .. " multi_worker: ranks differ: rank 1 compiled fit with epochs 3, rank 0 compiled epochs 2\n", true)
  end,

  ["ranks that build the same model train, and only rank 0 prints"] = function()
    if not usable() then return print("skipped: no MPI") end
    local ranks = per_rank("same")
    check.eq({ranks[1].status, ranks[2].status}, {0, 0}, ranks[1].err .. ranks[2].err)
    check.eq({ranks[1].out, ranks[2].out}, {"trained\n", ""})
    check.eq(ranks[1].err .. ranks[2].err, "")
  end,

  ["a rank that ends while rank 0 still works after training waits for it, and both succeed"] = function()
    if not usable() then return print("skipped: no MPI") end
    local ranks = per_rank("late")
    check.eq({ranks[1].status, ranks[2].status}, {0, 0}, ranks[1].err .. ranks[2].err)
    check.eq({ranks[1].out, ranks[2].out, ranks[1].err .. ranks[2].err}, {"trained\n", "", ""})
  end,

  ["a rank that finished its loop early is named as finished, not dead, within seconds"] = function()
    if not usable() then return print("skipped: no MPI") end
    local ranks, took = per_rank("multi fewer", script)
    check.is_true(took < 20, string.format("took %.1f s", took))
    check.is_true(ranks[1].err:find("same_weights.lua:%d+: multi_worker: rank 1 finished its script while rank 0 was "
      .. "in all%-reduce #%d+; every rank must run the same steps") ~= nil, ranks[1].err)
    check.is_true(ranks[2].err:find("multi_worker: rank 0 stopped with an error", 1, true) ~= nil, ranks[2].err)
    check.eq({ranks[1].status, ranks[2].status}, {1, 1})
  end,

  ["a rank that dies stops the job with its rank named"] = function()
    if not usable() then return print("skipped: no MPI") end
    local t0 = tpu.core.now()
    local out, ok = run(mpirun("multi die"))
    check.is_true(not ok, out)
    check.is_true(tpu.core.now() - t0 < 60, "took too long")
    check.is_true(out:find("rank 1", 1, true) ~= nil, out)
  end,
}
