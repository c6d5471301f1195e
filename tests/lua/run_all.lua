-- Runs every tests/lua/test_*.lua (or the files named on the command line). Each test file
-- returns a table of named test functions. Ends with "N passed, N failed"; exits 1 on failure.
local tpu = require "tpu"

local dir = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path

local files = {}
if #arg > 0 then
  for i = 1, #arg do files[#files + 1] = arg[i] end
else
  for _, name in ipairs(assert(tpu.core.list_dir(dir))) do
    if name:match("^test_.*%.lua$") then files[#files + 1] = dir .. "/" .. name end
  end
end

local passed, failed = 0, 0
for _, file in ipairs(files) do
  local chunk, load_err = loadfile(file)
  local ok, tests = false, load_err
  if chunk then ok, tests = pcall(chunk) end
  if not ok or type(tests) ~= "table" then
    failed = failed + 1
    print("FAIL " .. file .. ": " .. tostring(tests))
  else
    local names = {}
    for name in pairs(tests) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
      local t_ok, err = xpcall(tests[name], debug.traceback)
      if t_ok then
        passed = passed + 1
      else
        failed = failed + 1
        print(string.format("FAIL %s: %s\n%s", file:match("[^/]*$"), name, err))
      end
    end
  end
end
print(string.format("%d passed, %d failed", passed, failed))
if failed > 0 then os.exit(1, true) end  -- closing the state removes the files tests made (files.lua)
