-- Multi-worker training under mpirun (OpenMPI): 2 ranks x 1 core end with weights bitwise
-- equal to 1 process x 2 cores, with a hand-written step and with fit; a rank that dies stops
-- the others within 60 s, named.
local tpu = require "tpu"
local check = require "check"

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

  ["a rank that dies stops the job with its rank named"] = function()
    if not usable() then return print("skipped: no MPI") end
    local t0 = tpu.core.now()
    local out, ok = run(mpirun("multi die"))
    check.is_true(not ok, out)
    check.is_true(tpu.core.now() - t0 < 60, "took too long")
    check.is_true(out:find("rank 1", 1, true) ~= nil, out)
  end,
}
