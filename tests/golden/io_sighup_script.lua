-- SIGHUP (a closed terminal) outside fit: the running Lua code stops at once, the message names
-- its line, stdout (a pipe here, so fully buffered) reaches the reader, exit status 129.
print("before the signal")
os.execute("(sleep 0.2; kill -HUP $PPID) &")
local n = 0
while true do n = n + 1 end
