# cmake --install: headers, libmoejit.a and libmoejit.so, the tools, and the
# CMake package (find_package(moejit CONFIG) -> moejit::moejit, moejit::moejit_shared).
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/moejit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ${MOEJIT_LIBRARY_TARGETS} EXPORT moejitTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(MOEJIT_BUILD_TOOLS)
  install(TARGETS moejit-prewarm moejit-cache moejit-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(MOEJIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/moejit)
install(EXPORT moejitTargets NAMESPACE moejit:: DESTINATION ${MOEJIT_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/moejitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/moejitConfig.cmake INSTALL_DESTINATION ${MOEJIT_CMAKE_DIR})
# Why SameMinorVersion: before 1.0, a minor release may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/moejitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/moejitConfig.cmake ${PROJECT_BINARY_DIR}/moejitConfigVersion.cmake
  DESTINATION ${MOEJIT_CMAKE_DIR})
