#!/usr/bin/env python3
"""The peers of `strata-bench bncnn`: Keras' "simple MNIST convnet" with batch normalization.

    Input((28, 28, 1)), Conv2D(32, 3, use_bias=False), BatchNormalization(),
    Activation("relu"), MaxPooling2D(2), Conv2D(64, 3, use_bias=False),
    BatchNormalization(), Activation("relu"), MaxPooling2D(2), Flatten(), Dropout(0.5),
    Dense(10, softmax)
    BatchNormalization with Keras' defaults (momentum 0.99, epsilon 1e-3, center and scale);
    Adam (Keras' defaults), sparse categorical cross-entropy, accuracy; batch 128; the first
    --train-size Fashion-MNIST training images, scaled to [0, 1]; reshuffled every epoch,
    partial last batch kept.

One framework, one configuration, one process; the last line printed is `RESULT {json}`
with the fields strata-bench reads, as peers_cnn.py (whose data loading and Keras fit this
script shares): epoch_s (the first epoch compiling), fit_s, loss, accuracy, peak_rss_mib,
import/setup/data times and the versions.

    python peers_bncnn.py --framework keras-tf|keras-jax [--batch 128] [--train-size 5000]
                          [--epochs 4] [--data DIR]

Thread pools are the frameworks' defaults, every core the process may run on.
"""
import peers_cnn

FRAMEWORKS = ["keras-tf", "keras-jax"]


def bn_convnet(keras):
    from keras import layers
    return [
        keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(32, kernel_size=(3, 3), use_bias=False),
        layers.BatchNormalization(),
        layers.Activation("relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), use_bias=False),
        layers.BatchNormalization(),
        layers.Activation("relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(10, activation="softmax"),
    ]


def main():
    args = peers_cnn.arguments(__doc__, FRAMEWORKS)
    backend = "tensorflow" if args.framework == "keras-tf" else "jax"
    r = peers_cnn.run_keras(backend, args, build=bn_convnet)
    peers_cnn.report(r, args, "bncnn")


if __name__ == "__main__":
    main()
