"""How the TOSA 0.80 fixtures here were made (run once, outside the test suite).

``small_int8_tfV.tflite`` is a small random-weight int8 network (pad, convolution, depthwise
convolution, residual add, sigmoid and tanh tables, max pool, concat, transpose, reshape,
slice, dense) as TensorFlow V converts it; ``small_int8_tfV.mlir`` is its TOSA 0.80 MLIR as
TensorFlow V's TFLite legalisation writes it (``tflite_to_tosa_bytecode``), printed as text by
the MLIR of the same period. The tests read the MLIR and check it against the .tflite converted
by the current converter. Each needs an environment of its own:
V = 2.15 (LLVM 17): ``pip install tensorflow-cpu==2.15.1 iree-compiler==20231004.665``;
V = 2.16 (LLVM 18): ``pip install tensorflow-cpu==2.16.1 iree-compiler==20240226.813``.
"""

import numpy as np
import tensorflow as tf
from iree.compiler import ir
from tensorflow.mlir.experimental import tflite_to_tosa_bytecode

rng = np.random.default_rng(7)
NAME = f"small_int8_tf{'.'.join(tf.__version__.split('.')[:2])}"


def w(*shape):
    return tf.constant(rng.uniform(-0.5, 0.5, shape).astype(np.float32))


W1, B1 = w(3, 3, 3, 8), w(8)
DW, DB = w(3, 3, 8, 1), w(8)
W2, B2 = w(1, 1, 8, 8), w(8)
W3, B3 = w(1, 1, 8, 4), w(4)
FC, FB = w(96, 10), w(10)


@tf.function(input_signature=[tf.TensorSpec([None, 12, 12, 3], tf.float32)])
def net(x):
    x = tf.pad(x, [[0, 0], [1, 0], [0, 1], [0, 0]])
    x = tf.nn.relu(tf.nn.conv2d(x, W1, 2, "VALID") + B1)
    y = tf.nn.relu6(tf.nn.depthwise_conv2d(x, DW, [1, 1, 1, 1], "SAME") + DB)
    y = tf.nn.conv2d(y, W2, 1, "VALID") + B2
    x = tf.sigmoid(x + y)
    x = tf.nn.max_pool2d(x, 2, 2, "VALID")
    x = tf.concat([x, tf.tanh(tf.nn.conv2d(x, W3, 1, "VALID") + B3)], axis=3)
    x = tf.transpose(x, [0, 2, 1, 3])
    x = tf.reshape(x, [-1, 108])[:, :96]
    return tf.matmul(x, FC) + FB


def representative():
    for _ in range(64):
        yield [rng.uniform(-1, 1, (1, 12, 12, 3)).astype(np.float32)]


converter = tf.lite.TFLiteConverter.from_concrete_functions([net.get_concrete_function()], net)
converter.optimizations = [tf.lite.Optimize.DEFAULT]
converter.representative_dataset = representative
converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
converter.inference_input_type = converter.inference_output_type = tf.int8
with open(f"{NAME}.tflite", "wb") as fh:
    fh.write(converter.convert())
tflite_to_tosa_bytecode(f"{NAME}.tflite", f"{NAME}.mlirbc")
with open(f"{NAME}.mlirbc", "rb") as fh:
    module = ir.Module.parse(fh.read(), ir.Context())
with open(f"{NAME}.mlir", "w") as fh:
    fh.write(module.operation.get_asm(large_elements_limit=None))
