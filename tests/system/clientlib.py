# SPDX-License-Identifier: Apache-2.0
"""ctypes views of libsluice-client's plain structs (include/sluice/client.h, sluice/engine.h),
shared by the system tests that call the built library: test_lease_renew.py, test_tls.py."""
import ctypes
import os

from conftest import BUILD

CLIENT_LIB = os.path.join(BUILD, "lib", "libsluice-client.so")


class Request(ctypes.Structure):
    """sl_client_request (include/sluice/client.h)"""
    _fields_ = [("name", ctypes.c_char_p), ("name_len", ctypes.c_size_t),
                ("unique_key", ctypes.c_char_p), ("unique_key_len", ctypes.c_size_t),
                ("hits", ctypes.c_int64), ("limit", ctypes.c_int64), ("duration", ctypes.c_int64),
                ("burst", ctypes.c_int64), ("created_at", ctypes.c_int64),
                ("algorithm", ctypes.c_int32), ("behavior", ctypes.c_int32),
                ("sub_windows", ctypes.c_int32), ("lease_id", ctypes.c_uint64),
                ("max_delay_ms", ctypes.c_int64)]


class Item(ctypes.Structure):
    """sl_client_item"""
    _fields_ = [("req", Request), ("metadata", ctypes.c_void_p),
                ("metadata_count", ctypes.c_size_t)]
