# `cmake --install build` puts the rapide binary in <prefix>/bin and its documents in
# <prefix>/share/doc/rapide; `cpack -G DEB` (run in the build folder) turns the same install
# into a Debian package whose dependencies dpkg-shlibdeps reads from the binary.
include(GNUInstallDirs)
install(TARGETS rapide RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The --help text of every subcommand, man-style, written by the binary itself at build time.
install(FILES ${CMAKE_BINARY_DIR}/rapide-help.txt DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_PACKAGE_NAME rapide)
set(CPACK_PACKAGE_VENDOR "the rapide authors")
set(CPACK_PACKAGE_CONTACT "rapide maintainers <rapide@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM inference server and optimization toolkit for CPUs")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # libfmt, libspdlog, libpcre2, libzstd, ... from ldd
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/rapide/rapide")
include(CPack)
