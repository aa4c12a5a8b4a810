"""A model with its own step (a VAE, a GAN) gets the activation statistics of the layers nested in its sub-models."""

import warnings

import tfguard
from tests.firewall import foreign
from tests.summary.readback import read_run


def test_a_vae_with_its_own_step_logs_the_layers_inside_its_encoder_and_decoder(tmp_path):
    model, x = foreign.vae()
    encoder_relu = model.encoder.layers[2]  # the Dense(16, relu) inside the encoder
    decoder_sigmoid = model.decoder.layers[1]  # the Dense(64, sigmoid) inside the decoder
    logger = tfguard.Logger(str(tmp_path), scalars_every=1, histograms_every=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        tfguard.guard(model, policy="skip", quarantine_dir=None)
        model.fit(x, batch_size=16, epochs=1, verbose=0, callbacks=[logger])
    run = read_run(logger.run_path)
    assert f"activation/dead_fraction/{encoder_relu.name}" in run
    assert f"activation/saturated_fraction/{decoder_sigmoid.name}" in run
    assert f"hist/activations/{encoder_relu.name}" in run
