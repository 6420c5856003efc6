"""The failure of converting a LoRA adapter to GGUF, apart from the converter so that
`command.run_command` can name it without importing the converter (which runs commands through it)."""


class AdapterConversionError(RuntimeError):
    """The adapter could not be converted; the message names the input and the fix."""
