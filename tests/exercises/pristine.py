#!/usr/bin/env python3
"""pristine.py -- the exercises' skeletons as the repository ships them, whatever the learner did.

The grader's self-tests ("the skeleton scores zero", the skeleton programs say "not implemented")
must test the skeleton that was shipped, not exercises/<NN>/<file>, which is the learner's
working copy and holds their solution once they have done the exercise. pristine.json records,
per exercise, the git blob id of the shipped skeleton; the skeleton is read back from the
repository's objects by that id (`git cat-file blob`), so neither editing nor committing the
working copy changes it. Where there is no git (an exported tree), the working copy is used only
if it is still byte for byte the recorded skeleton.

    pristine.py EXERCISE OUT          write the pristine skeleton of EXERCISE to the file OUT
    pristine.py --check               every recorded blob is there and is a skeleton (CTest)
    pristine.py --record EXERCISE     record the working copy as the skeleton (after a maintainer
                                      edits it; commit pristine.json with the edit)
Exit status 0, 1 when a skeleton cannot be found, 2 on bad usage.
"""
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RECORD = os.path.join(HERE, "pristine.json")
MARKER = b"TODO not implemented"  # every skeleton says so until the learner is done


def working_copy(exercise):
    with open(os.path.join(ROOT, "exercises", exercise, "grading.json")) as f:
        name = json.load(f)["submission_file"]
    return os.path.join(ROOT, "exercises", exercise, name)


def blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def skeleton(exercise):
    """The shipped skeleton's bytes; raises LookupError saying why it cannot be found."""
    with open(RECORD) as f:
        blob = json.load(f).get(exercise)
    if not blob:
        raise LookupError(f"{exercise}: no skeleton recorded in {RECORD}")
    try:
        done = subprocess.run(["git", "-C", ROOT, "cat-file", "blob", blob],
                              capture_output=True, timeout=60)
        if done.returncode == 0:
            return done.stdout
    except OSError:
        pass
    with open(working_copy(exercise), "rb") as f:
        data = f.read()
    if blob_id(data) == blob:
        return data
    raise LookupError(f"{exercise}: the shipped skeleton (git blob {blob[:12]}) is not in this "
                      "repository's objects and the working copy differs from it")


def main(argv):
    try:
        if len(argv) == 3 and not argv[1].startswith("-"):
            data = skeleton(argv[1])
            with open(argv[2], "wb") as f:
                f.write(data)
            return 0
        if argv[1:] == ["--check"]:
            with open(RECORD) as f:
                for exercise in sorted(json.load(f)):
                    data = skeleton(exercise)
                    if MARKER not in data:
                        raise LookupError(f"{exercise}: the recorded skeleton lacks '{MARKER}'")
                    print(f"{exercise}: skeleton found")
                    with open(working_copy(exercise), "rb") as f:
                        mine = f.read()
                    if mine != data and MARKER in mine:
                        print(f"note: {exercise}: the working copy differs from the recorded "
                              "skeleton; a maintainer who edited the skeleton records it with "
                              f"tests/exercises/pristine.py --record {exercise}")
            print("PASS")
            return 0
        if len(argv) == 3 and argv[1] == "--record":
            with open(working_copy(argv[2]), "rb") as f:
                data = f.read()
            if MARKER not in data:
                raise LookupError(f"{argv[2]}: the working copy is not a skeleton (no marker)")
            with open(RECORD) as f:
                record = json.load(f)
            record[argv[2]] = blob_id(data)
            with open(RECORD, "w") as f:
                json.dump(record, f, indent=2)
                f.write("\n")
            return 0
    except (LookupError, OSError, KeyError) as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    print("usage: pristine.py EXERCISE OUT | --check | --record EXERCISE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
