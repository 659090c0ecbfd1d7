"""The TOSA 0.80 flatbuffer schema, as data.

The binary layout of TOSA 0.80 ``.tosa`` files: the serialization library's ``schema/tosa.fbs``
at its v0.80.0 tag, restated field by field (docs/sources.md#tosa-080) in the same
flatbuffer-schema syntax that ``hwsim.tosa.schema`` parses for the 1.x schema, so one parser and
one generic table codec (``hwsim.tosa.fbtable``) serve both versions. A table field's vtable slot
is its position below; a union field takes two slots (its type tag, then the table).
"""

from __future__ import annotations

import functools

from hwsim.tosa.schema import Schema, parse_schema

TEXT = """
namespace tosa;
file_identifier "TOSA";

enum DType:uint32 { UNKNOWN = 0, BOOL, UINT8, INT4, INT8, INT16, INT32, INT48, FP32, UINT16,
                    FP16, BF16, SHAPE }
enum ResizeMode:uint32 { UNKNOWN = 0, NEAREST, BILINEAR }
enum Op:uint32 {
  UNKNOWN = 0, ARGMAX, AVG_POOL2D, CONV2D, CONV3D, DEPTHWISE_CONV2D, FULLY_CONNECTED, MATMUL,
  MAX_POOL2D, TRANSPOSE_CONV2D, CLAMP, RESERVED, SIGMOID, TANH, ADD, ARITHMETIC_RIGHT_SHIFT,
  BITWISE_AND, BITWISE_OR, BITWISE_XOR, INTDIV, LOGICAL_AND, LOGICAL_LEFT_SHIFT,
  LOGICAL_RIGHT_SHIFT, LOGICAL_OR, LOGICAL_XOR, MAXIMUM, MINIMUM, MUL, POW, SUB, TABLE, ABS,
  BITWISE_NOT, CEIL, CLZ, EXP, FLOOR, LOG, LOGICAL_NOT, NEGATE, RECIPROCAL, RSQRT, SELECT,
  EQUAL, GREATER, GREATER_EQUAL, REDUCE_ANY, REDUCE_ALL, REDUCE_MAX, REDUCE_MIN,
  REDUCE_PRODUCT, REDUCE_SUM, CONCAT, PAD, RESHAPE, REVERSE, SLICE, TILE, TRANSPOSE, GATHER,
  SCATTER, RESIZE, CAST, RESCALE, CONST, IDENTITY, CUSTOM, COND_IF, WHILE_LOOP, FFT2D, RFFT2D,
  ERF, DIM }

union Attribute {
  PoolAttribute, ConvAttribute, TransposeConvAttribute, PadAttribute, AxisAttribute,
  ReshapeAttribute, SliceAttribute, TileAttribute, ResizeAttribute, ClampAttribute,
  RescaleAttribute, MulAttribute, ArithmeticRightShiftAttribute, CondIfAttribute,
  WhileLoopAttribute, TransposeAttribute, TableAttribute, MatMulAttribute,
  FullyConnectedAttribute, NegateAttribute, CustomAttribute, FFTAttribute }

table PoolAttribute { pad: [int32]; kernel: [int32]; stride: [int32]; input_zp: int32;
                      output_zp: int32; accum_dtype: DType; }
table ConvAttribute { pad: [int32]; stride: [int32]; dilation: [int32]; input_zp: int32;
                      weight_zp: int32; }
table TransposeConvAttribute { out_pad: [int32]; stride: [int32]; output_shape: [int32];
                               input_zp: int32; weight_zp: int32; }
table PadAttribute { padding: [int32]; pad_const_int: int32;
                     pad_const_fp: [ubyte] (force_align: 8); }
table AxisAttribute { axis: int32; }
table ReshapeAttribute { new_shape: [int32]; }
table SliceAttribute { start: [int32]; size: [int32]; }
table TileAttribute { multiples: [int32]; }
table ResizeAttribute { scale: [int16]; offset: [int16]; border: [int16]; mode: ResizeMode; }
table ClampAttribute { min_int: int32; max_int: int32; min_fp: [ubyte] (force_align: 8);
                       max_fp: [ubyte] (force_align: 8); }
table RescaleAttribute { input_zp: int32; output_zp: int32; multiplier: [int32];
                         shift: [int32]; scale32: bool; double_round: bool; per_channel: bool;
                         input_unsigned: bool; output_unsigned: bool; }
table MulAttribute { shift: int32; }
table ArithmeticRightShiftAttribute { round: bool; }
table CondIfAttribute { then_branch: string; else_branch: string; }
table WhileLoopAttribute { cond_branch: string; body_branch: string; }
table TransposeAttribute { perms: [int32]; }
table TableAttribute { table: [int16]; }
table MatMulAttribute { a_zp: int32; b_zp: int32; }
table FullyConnectedAttribute { input_zp: int32; weight_zp: int32; }
table NegateAttribute { input1_zp: int32; output_zp: int32; }
table CustomAttribute { identifier: string; config: string; implementation_attrs: [ubyte]; }
table FFTAttribute { inverse: bool; }

table Version { _major: int32 = -1; _minor: int32 = -1; _patch: int32 = -1;
                _draft: bool = true; }
table TosaTensor { name: string; shape: [int32]; type: DType;
                   data: [ubyte] (force_align: 8); variable: bool; is_unranked: bool; }
table TosaOperator { op: Op; attribute: Attribute; inputs: [string]; outputs: [string]; }
table TosaBasicBlock { name: string; operators: [TosaOperator]; tensors: [TosaTensor];
                       inputs: [string]; outputs: [string]; }
table TosaRegion { name: string; blocks: [TosaBasicBlock]; }
table TosaGraph { version: Version (required); regions: [TosaRegion]; }
root_type TosaGraph;
"""

# Which attribute table each 0.80 operator takes (the 1.x schema has one table per operator;
# 0.80 shares tables, so the pairing is data here). Operators not listed take none.
ATTRIBUTE_OF = {
    "ARGMAX": "AxisAttribute", "AVG_POOL2D": "PoolAttribute", "MAX_POOL2D": "PoolAttribute",
    "CONV2D": "ConvAttribute", "CONV3D": "ConvAttribute", "DEPTHWISE_CONV2D": "ConvAttribute",
    "FULLY_CONNECTED": "FullyConnectedAttribute", "MATMUL": "MatMulAttribute",
    "TRANSPOSE_CONV2D": "TransposeConvAttribute", "CLAMP": "ClampAttribute",
    "ARITHMETIC_RIGHT_SHIFT": "ArithmeticRightShiftAttribute", "MUL": "MulAttribute",
    "TABLE": "TableAttribute", "NEGATE": "NegateAttribute",
    "REDUCE_ANY": "AxisAttribute", "REDUCE_ALL": "AxisAttribute", "REDUCE_MAX": "AxisAttribute",
    "REDUCE_MIN": "AxisAttribute", "REDUCE_PRODUCT": "AxisAttribute",
    "REDUCE_SUM": "AxisAttribute", "CONCAT": "AxisAttribute", "REVERSE": "AxisAttribute",
    "PAD": "PadAttribute", "RESHAPE": "ReshapeAttribute", "SLICE": "SliceAttribute",
    "TILE": "TileAttribute", "TRANSPOSE": "TransposeAttribute", "RESIZE": "ResizeAttribute",
    "RESCALE": "RescaleAttribute", "CUSTOM": "CustomAttribute", "COND_IF": "CondIfAttribute",
    "WHILE_LOOP": "WhileLoopAttribute", "FFT2D": "FFTAttribute", "DIM": "AxisAttribute",
}


@functools.lru_cache(maxsize=None)
def schema() -> Schema:
    return parse_schema(TEXT)
