"""Integers too long for Python to read or print, and short forms of long numbers for messages."""

from __future__ import annotations

import string
import sys

from msgspec import Struct

__all__ = ["TooLong", "huge", "read_int", "short_number", "too_long", "too_long_message"]


class TooLong(Struct, frozen=True):
    """In place of an integer of a config file that has more decimal digits than Python reads
    or prints (`sys.get_int_max_str_digits()`, 4300 by default): `shown` is its short form."""

    shown: str


def read_int(text: str, base: int = 10) -> int | TooLong:
    """`int(text, base)`, or TooLong when the integer has too many decimal digits."""
    try:
        value = int(text, base)
    except ValueError:
        if base == 10 and text.lstrip("+-").isdigit():  # only the digit limit refuses these
            return TooLong(short_number(text))
        raise
    return huge(value) if too_long(value) else value


def huge(value: int) -> TooLong:
    """TooLong for an integer `too_long` to print, shown in hexadecimal (which has no limit)."""
    sign, hexa = "-" if value < 0 else "", f"{abs(value):x}"
    return TooLong(f"{sign}0x{hexa[:6]}…{hexa[-6:]} ({len(hexa)} hex digits)")


def too_long(value: int) -> bool:
    """Whether `value` has more decimal digits than Python prints (`str(value)` would raise)."""
    limit = sys.get_int_max_str_digits()
    # at most 3.3 bits per allowed digit is below 10**limit (log2(10) is 3.32): no power taken
    return limit > 0 and value.bit_length() > 3.3 * limit and abs(value) >= 10**limit


def too_long_message(value: TooLong) -> str:
    """The error for an integer with too many digits: what it is and what is allowed."""
    limit = sys.get_int_max_str_digits()
    return (f"number {value.shown} has too many digits: an integer may have at most {limit} "
            "decimal digits")


def short_number(text: str, keep: int = 6) -> str:
    """`text` (a number as written, maybe with a unit) itself when short; else its start and
    end around `…`, with the count of its digits: `999999…999999 (5000 digits)`; of its
    characters when it is no one number (`1s1s1s…1s1s1s (200000 characters)`)."""
    if len(text) <= 2 * keep + 8:
        return text
    body = text.strip().lstrip("+-").rstrip(string.ascii_letters + " ")
    if all(c.isdigit() or c in "_.eE" for c in body):
        count = f"{sum(c.isdigit() for c in text)} digits"
    else:
        count = f"{len(text)} characters"
    return f"{text[:keep]}…{text[-keep:]} ({count})"
