# Installing and packaging. `cmake --install build` puts rapide (and rapide-mpi, when built)
# in <prefix>/bin and the documents in <prefix>/share/doc/rapide; `cpack -G DEB` (run in the
# build folder) turns the same install into two Debian packages, one per install component:
#   rapide       component `rapide`: the one-process binary, README, LICENSE, rapide-help.txt.
#                Links no MPI, so installing it pulls no Open MPI.
#   rapide-mpi   component `mpi` (RAPIDE_MPI): the rapide-mpi binary that runs --tp / --pp /
#                --disaggregate ranks under mpirun; depends on rapide (same version) and on
#                the Open MPI libraries it links.
# dpkg-shlibdeps reads each package's dependencies from its own binary, and CPack strips the
# binaries it packages.
include(GNUInstallDirs)
install(TARGETS rapide RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT rapide)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT rapide)
# The --help text of every subcommand, man-style, written by the binary itself at build time.
install(FILES ${CMAKE_BINARY_DIR}/rapide-help.txt DESTINATION ${CMAKE_INSTALL_DOCDIR}
        COMPONENT rapide)
set(rapide_components rapide)
if(RAPIDE_MPI)
  install(TARGETS rapide-mpi RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT mpi)
  list(APPEND rapide_components mpi)
endif()

# CMake writes the list of files an install copied to <build>/install_manifest.txt (or
# install_manifest_<component>.txt, as cpack does), at a path fixed in the generated
# cmake_install.cmake and with no option to turn it off (CMake 3.25 through 4.x). So that an
# install (a `sudo cmake --install build` above all) leaves the build tree as it was, those
# names are links to /dev/null, made here at configure time: the install writes through them
# and nothing in the build tree changes. The files an install copies are the few named above
# (and in the README's "Install").
foreach(manifest install_manifest.txt install_manifest_rapide.txt install_manifest_mpi.txt)
  file(CREATE_LINK /dev/null ${CMAKE_BINARY_DIR}/${manifest} SYMBOLIC)
endforeach()

set(CPACK_PACKAGE_NAME rapide)
set(CPACK_PACKAGE_VENDOR "the rapide authors")
set(CPACK_PACKAGE_CONTACT "rapide maintainers <rapide@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM inference server and optimization toolkit for CPUs")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the symbols stay in the build tree's binaries
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # libfmt, libspdlog, libpcre2, libzstd, ... from ldd
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/rapide/rapide")

# One package per component; rapide-mpi's Depends gets `rapide (= version)` from DEPENDS.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL ${rapide_components})
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_RAPIDE_PACKAGE_NAME rapide)
# The synopsis line of both is CPACK_PACKAGE_DESCRIPTION_SUMMARY; these are the bodies.
set(CPACK_DEBIAN_RAPIDE_DESCRIPTION
    "rapide serves, runs, benchmarks, advises and quantizes models in one process and links no \
MPI. Tensor and pipeline parallelism and prefill/decode disaggregation are in rapide-mpi.")
set(CPACK_DEBIAN_MPI_PACKAGE_NAME rapide-mpi)
set(CPACK_COMPONENT_MPI_DEPENDS rapide)
set(CPACK_DEBIAN_MPI_DESCRIPTION
    "rapide-mpi is rapide linked with Open MPI: its --tp, --pp and --disaggregate run one \
process per rank under mpirun, e.g. mpirun -np 2 rapide-mpi serve -m MODEL --tp 2.")
include(CPack)
