"""Scoring documents with quality classifiers read from local disk (the `classifier` stage).

params.py       the stage's recipe parameters: the models, how scores combine, what is kept
source.py       a model named by a recipe resolved to files on disk (a hub id: the local
                Hugging Face cache only) and their sha256, which enter the fingerprint
predictions.py  what every model returns for a batch: labels, probabilities, the top label
fasttext_model.py  fastText supervised `.bin` models (DCLM), run by fasttext-predict
hf_model.py     Hugging Face sequence-classification model folders (FineWeb-Edu), batched
                by length, offline, CPU unless the recipe says cuda
inspect.py      what `curate inspect-filter` shows: the score histogram, examples either side
"""
