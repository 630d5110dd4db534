# The installable package: libseqc (the JIT, shared), libseqc_runtime
# (static, all that ahead-of-time objects need), the public headers, the
# tools, a CMake package (find_package(Seqc)) and pkg-config files.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# libseqc.so: the engine and everything it compiles with, MLIR and LLVM as
# shared dependencies found through the RPATH.
add_library(seqc SHARED ${PROJECT_SOURCE_DIR}/lib/SharedLibrary.cpp)
add_dependencies(seqc seqc_engine seqc_runtime)
target_link_libraries(seqc PRIVATE
  -Wl,--whole-archive $<TARGET_FILE:seqc_engine> $<TARGET_FILE:seqc_runtime>
  -Wl,--no-whole-archive seqc_engine ${SEQC_MLIR_LIBS})
target_include_directories(seqc INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
set_target_properties(seqc PROPERTIES
  VERSION ${PROJECT_VERSION} SOVERSION 0
  INSTALL_RPATH "${LLVM_LIBRARY_DIR}"
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)

set(SEQC_PUBLIC_HEADERS
  include/seqc/Aot.h include/seqc/Engine.h include/seqc/Npy.h
  include/seqc/Signature.h include/seqc/Tensor.h include/seqc/Weights.h
  include/seqc/seqc.h
  include/seqc/seqc_runtime.h)
install(FILES ${SEQC_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/seqc)

install(TARGETS seqc EXPORT SeqcTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS seqc_runtime EXPORT SeqcTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS seqc-opt seqc-run seqc-compile seqc-aot-run
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Installed tools find libMLIR/libLLVM where the build found them.
set_target_properties(seqc-opt seqc-run seqc-compile PROPERTIES
  INSTALL_RPATH "${LLVM_LIBRARY_DIR}")
# The imported targets carry their link dependencies, not our build tree's
# include directories.
set_target_properties(seqc_runtime PROPERTIES EXPORT_NAME runtime)
install(EXPORT SeqcTargets NAMESPACE Seqc::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Seqc)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/SeqcConfig.cmake.in
  ${PROJECT_BINARY_DIR}/SeqcConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Seqc
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SeqcConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/SeqcConfig.cmake
  ${PROJECT_BINARY_DIR}/SeqcConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Seqc)

# The .pc files locate the prefix from their own directory, so an installed
# tree can move.
file(RELATIVE_PATH SEQC_PC_TO_PREFIX
  "${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
foreach(pc seqc seqc-runtime)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in
                 ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

# The documentation: the generated op / attribute / pass reference and the
# guides.
install(FILES
  ${PROJECT_BINARY_DIR}/docs/generated/SeqOps.md
  ${PROJECT_BINARY_DIR}/docs/generated/SeqAttrs.md
  ${PROJECT_BINARY_DIR}/docs/generated/SeqRtOps.md
  ${PROJECT_BINARY_DIR}/docs/generated/SeqPasses.md
  DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/seqc/reference)
file(GLOB SEQC_GUIDES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${SEQC_GUIDES} DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/seqc)

# lit + FileCheck tests of a user's own pipelines against this install:
# `seqc-lit init DIR` writes a lit.cfg.py that loads share/seqc/lit/seqc_lit.py
# (docs/testing.md).
install(FILES ${PROJECT_SOURCE_DIR}/tools/seqc-lit/seqc_lit.py
  DESTINATION ${CMAKE_INSTALL_DATADIR}/seqc/lit)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/seqc-lit/seqc-lit
  DESTINATION ${CMAKE_INSTALL_BINDIR})
