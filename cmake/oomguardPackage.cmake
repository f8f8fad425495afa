# The install rules and the CMake package: `cmake --install build --prefix P` gives
#   P/include/oomguard/*.h             the public headers, nothing else (they include no internal header)
#   P/lib/liboomguard_*.a              the floors oomguard::oomguard links
#   P/bin/oomguard                     the tool (oomguard::tool)
#   P/share/oomguard/scenarios/        the catalog, FORMAT.md and baselines/
#   P/lib/cmake/oomguard/              oomguardConfig.cmake, its version file, the targets and the
#                                      CTest module (oomguardScenarios.cmake and what it uses)
# and a consumer needs nothing but CMAKE_PREFIX_PATH=P. Included by the top CMakeLists, last.
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

# bin/ and share/oomguard/scenarios are fixed, not GNUInstallDirs': the tool looks for its catalog at
# <dir of the executable>/../share/oomguard/scenarios (scenario/catalog.cpp).
set(OOMGUARD_INSTALL_CATALOG_DIR share/oomguard/scenarios)
set(OOMGUARD_INSTALL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/oomguard)

# Every floor library (oomguard_library adds them to OOMGUARD_LIBRARIES: the LibTorch-free ones, the
# optional cuda one, the GoogleTest matchers), the umbrella and the tool.
get_property(_oomguard_exported GLOBAL PROPERTY OOMGUARD_LIBRARIES)
list(APPEND _oomguard_exported oomguard_umbrella oomguard)
# The matchers bring GoogleTest: the config file finds it only when they are exported.
set(OOMGUARD_EXPORTS_GTEST OFF)
if("oomguard_gtest" IN_LIST _oomguard_exported)
  set(OOMGUARD_EXPORTS_GTEST ON)
endif()

# The installed tool runs against the wheel's shared libraries where the build found them.
set_target_properties(oomguard PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS ${_oomguard_exported} EXPORT oomguardTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION bin)
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/oomguard/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/oomguard
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/scenarios/ DESTINATION ${OOMGUARD_INSTALL_CATALOG_DIR}
        FILES_MATCHING PATTERN "*.json" PATTERN "FORMAT.md")
install(EXPORT oomguardTargets NAMESPACE oomguard:: DESTINATION ${OOMGUARD_INSTALL_CMAKE_DIR})

configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/oomguardConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/oomguardConfig.cmake
                              INSTALL_DESTINATION ${OOMGUARD_INSTALL_CMAKE_DIR}
                              PATH_VARS OOMGUARD_INSTALL_CATALOG_DIR)
# 0.x: a minor release may break the API, so 0.1 accepts 0.1.* only.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/oomguardConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/oomguardConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/oomguardConfigVersion.cmake
              ${CMAKE_CURRENT_SOURCE_DIR}/cmake/oomguardScenarios.cmake
              ${CMAKE_CURRENT_SOURCE_DIR}/cmake/oomguardCards.cmake
              ${CMAKE_CURRENT_SOURCE_DIR}/cmake/oomguardResourceSpec.cmake
              ${CMAKE_CURRENT_SOURCE_DIR}/cmake/oomguardRunOnGpu.cmake
        DESTINATION ${OOMGUARD_INSTALL_CMAKE_DIR})
