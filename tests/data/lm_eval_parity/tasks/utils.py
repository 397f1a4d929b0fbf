"""Helpers named by the parity tasks' `!function` entries."""


def add_prefix(dataset):
    return dataset.map(lambda row: {"question": "Q. " + row["question"]})


def blank_index(row):
    return int(row["answer"]) - 1


def blank_contexts(row):
    cut = row["sentence"].index("_")
    return [row["sentence"][:cut] + row["option1"], row["sentence"][:cut] + row["option2"]]


def blank_continuation(row):
    cut = row["sentence"].index("_") + 1
    return " " + row["sentence"][cut:].strip()
