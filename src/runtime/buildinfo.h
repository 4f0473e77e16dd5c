/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What this build is: the version (the VERSION file, plus `git describe` in a checkout) and the
 * commit it was built from ("unknown" from a tarball), written by CMake into a generated source
 * (build/gen/buildinfo.c) so that the start-up log line, sluice_build_info and the status page
 * name the same build, and only that one file changes when the commit does.
 */
#ifndef SLUICE_RUNTIME_BUILDINFO_H
#define SLUICE_RUNTIME_BUILDINFO_H

extern const char sl_buildinfo_version[];
extern const char sl_buildinfo_commit[];

#endif
