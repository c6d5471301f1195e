# `cmake --install build --prefix P` (DESIGN section 10): the binary, the library with its header,
# pkg-config and CMake package files, and the Lua module P/lib/lua/5.4/tpu.so, which is the
# library itself (a symbolic link), so a host that links it and a script that requires it load
# one copy. Paths are fixed under P (lib/, not a multiarch directory): lib/lua/5.4 is where
# lua5.4 looks for C modules under /usr/local.
include(CMakePackageConfigHelpers)

install(TARGETS tputrain RUNTIME DESTINATION bin)
install(TARGETS libtputrain LIBRARY DESTINATION lib)
install(FILES ${CMAKE_SOURCE_DIR}/interpreter/tputrain.h DESTINATION include)

configure_file(${CMAKE_SOURCE_DIR}/cmake/tputrain.pc.in ${CMAKE_BINARY_DIR}/tputrain.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/tputrain.pc DESTINATION lib/pkgconfig)

write_basic_package_version_file(${CMAKE_BINARY_DIR}/tputrainConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_SOURCE_DIR}/cmake/tputrainConfig.cmake ${CMAKE_BINARY_DIR}/tputrainConfigVersion.cmake
        DESTINATION lib/cmake/tputrain)

install(CODE "
  set(lua_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/lua/5.4\")
  file(MAKE_DIRECTORY \"\${lua_dir}\")
  message(STATUS \"Installing: \${lua_dir}/tpu.so -> ../../libtputrain.so.0\")
  file(CREATE_LINK ../../libtputrain.so.0 \"\${lua_dir}/tpu.so\" SYMBOLIC)
")
