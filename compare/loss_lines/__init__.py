"""One rank's printed losses out of a log (reader.py), by families of formats as the corpus has them
(examples/logs/corpus/): the table of named formats in formats.py, launchers' rank prefixes in prefixes.py,
structured lines in structured.py, trainers' key-value lines in key_value.py, key-value lines and tables read
by rule in fields.py; steps in numbering.py and
recording.py (restarts). The names other modules use are here."""

from compare.defaults import ON_RESTART, STEP_FROM
from compare.loss_lines.fields import FieldNames
from compare.loss_lines.formats import FORMATS
from compare.loss_lines.prefixes import VERIFY_TAG, split_pieces
from compare.loss_lines.reader import compile_patterns, read_loss_log
from compare.loss_lines.recording import LossLog, Restart
from compare.loss_lines.tokens import CORPUS, Format, LossLogError

__all__ = [
           "CORPUS",
           "FORMATS",
           "ON_RESTART",
           "STEP_FROM",
           "VERIFY_TAG",
           "FieldNames",
           "Format",
           "LossLog",
           "LossLogError",
           "Restart",
           "compile_patterns",
           "read_loss_log",
           "split_pieces",
]
