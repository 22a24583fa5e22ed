"""Scoring documents with quality classifiers read from local disk (the `classifier` stage).

params.py       the stage's recipe parameters: the models, how scores combine, what is kept
source.py       a model named by a recipe resolved to files on disk (a hub id: the local
                Hugging Face cache only) and their sha256, which enter the fingerprint
predictions.py  what every model returns for a batch: labels, probabilities, the top label
fasttext_model.py  fastText supervised `.bin` models (DCLM), run by fasttext-predict
"""
