/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SL_EXPORT marks what the shared libraries export. Every project object is compiled with hidden
 * visibility (CMakeLists.txt: sl_layer()), so libsluice.so and libsluice-client.so export exactly
 * the functions declared SL_EXPORT in include/sluice/ and nothing of their internals, llhttp or
 * the generated protobuf-c code. The exported names are listed in packaging/symbols/ (one
 * .symbols file per library) and checked by ctest test_exports: a change of a list is a change
 * of the ABI.
 */
#ifndef SLUICE_EXPORT_H
#define SLUICE_EXPORT_H

#define SL_EXPORT __attribute__((visibility("default")))

#endif
