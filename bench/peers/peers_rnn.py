#!/usr/bin/env python3
"""The peers of `strata-bench rnn`: examples/lstm_fashion_mnist.rs in Keras 3.

    Input((28, 28)), LSTM(128), Dense(10, softmax): each Fashion-MNIST image read row by
    row, 28 steps of 28 pixels, the last state classified. Adam (Keras' defaults), sparse
    categorical cross-entropy, accuracy; batch 128; the first --train-size training images,
    scaled to [0, 1]; reshuffled every epoch, partial last batch kept.

One framework, one configuration, one process; the last line printed is `RESULT {json}`
with the fields strata-bench reads, as peers_cnn.py (whose data loading and Keras fit this
script shares): epoch_s (the first epoch compiling), fit_s, loss, accuracy, peak_rss_mib,
import/setup/data times and the versions.

    python peers_rnn.py --framework keras-tf|keras-jax [--batch 128] [--train-size 5000]
                        [--epochs 4] [--data DIR]

Keras picks the LSTM's implementation itself: on the CPU, TensorFlow runs its while loop
and JAX a `lax.scan`, both jit-compiled by Keras' defaults (cuDNN only on a GPU). Thread
pools are the frameworks' defaults, every core the process may run on.
"""
import peers_cnn

FRAMEWORKS = ["keras-tf", "keras-jax"]


def row_reader(keras):
    from keras import layers
    return [
        keras.Input(shape=(28, 28)),
        layers.LSTM(128),
        layers.Dense(10, activation="softmax"),
    ]


def main():
    args = peers_cnn.arguments(__doc__, FRAMEWORKS)
    backend = "tensorflow" if args.framework == "keras-tf" else "jax"
    r = peers_cnn.run_keras(backend, args, build=row_reader, shape=(28, 28))
    peers_cnn.report(r, args, "rnn")


if __name__ == "__main__":
    main()
