# Stub: gguf-py's vocab module imports SentencePieceProcessor at import time; writing an
# adapter GGUF never uses it, and sentencepiece is not installed here.
class SentencePieceProcessor:
    pass
