# nitro_precompile(<name> [LIBRARIES <lib>...]) — <nitro/main.hpp> (the handle, the command line and
# everything they include: Eigen, Hana, nlohmann-json, the standard library) parsed once, into a
# precompiled header that any number of trainers reuse:
#
#   nitro_precompile(trainers_pch LIBRARIES nitro::nitro nitro::runtime)
#   add_executable(my_trainer my_trainer.cpp)
#   target_link_libraries(my_trainer PRIVATE nitro::nitro nitro::runtime)
#   target_precompile_headers(my_trainer REUSE_FROM trainers_pch)
#
# A precompiled header is only valid for translation units compiled with the same flags and
# definitions, so <name> links exactly what the trainers link (LIBRARIES; nitro::nitro when none):
# nitro::runtime (NITRO_RUNTIME_LIB), nitro::mpi (NITRO_WITH_MPI), a flags target. Where they differ
# the compiler parses the headers as if there were no precompiled header (g++ says so with
# -Winvalid-pch): slower, never wrong.
#
# g++ and clang++ (clang 14 included: the headers keep clear of llvm/llvm-project#53757, a crash
# reading a lambda inside decltype back from a precompiled header; docs/compile-time.md).
function(nitro_precompile name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "LIBRARIES")
  if(NOT arg_LIBRARIES)
    set(arg_LIBRARIES nitro::nitro)
  endif()
  set(anchor ${CMAKE_CURRENT_BINARY_DIR}/${name}_anchor.cpp)
  file(GENERATE OUTPUT ${anchor} CONTENT "// anchors the precompiled <nitro/main.hpp> of ${name}\n")
  add_library(${name} OBJECT EXCLUDE_FROM_ALL ${anchor})
  target_link_libraries(${name} PRIVATE ${arg_LIBRARIES})
  target_precompile_headers(${name} PRIVATE <nitro/main.hpp>)
endfunction()
