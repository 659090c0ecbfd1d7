"""What a program says: instruction fields, encodings, assembly text, validation."""
