"""The aclDataType values the operator contracts name, as numpy dtypes (API.md: tensors are numpy arrays
whose dtype is the aclDataType). One table for every contract; HIFLOAT8 travels as UINT8 storage."""
import ml_dtypes
import numpy as np

FP16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
FP32 = np.dtype(np.float32)
INT8 = np.dtype(np.int8)
UINT8 = np.dtype(np.uint8)
INT16 = np.dtype(np.int16)
UINT16 = np.dtype(np.uint16)
INT32 = np.dtype(np.int32)
UINT32 = np.dtype(np.uint32)
INT64 = np.dtype(np.int64)
UINT64 = np.dtype(np.uint64)
BOOL = np.dtype(np.bool_)
FP8_E5M2 = np.dtype(ml_dtypes.float8_e5m2)
FP8_E4M3FN = np.dtype(ml_dtypes.float8_e4m3fn)
