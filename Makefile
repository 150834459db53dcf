# The two commands of the README:  make book  (install + build the website)  and  make test  (what CI checks).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CHAPTERS  := $(wildcard book/[0-9][0-9]_*.ipynb)

.PHONY: install book serve test notebooks clean

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

## make book: build the website from the committed notebook outputs
book: install
	$(BIN)/jupyter-book build --keep-going .
	@echo "Book built: open _build/html/index.html (or run: make serve)"

## make serve: serve the built website on http://localhost:8000
serve: book
	$(BIN)/python -m http.server --directory _build/html 8000

## make test: unit and checker tests, exercise-version sync, strict nbval on every chapter, then a
## from-scratch book build in which any warning is an error
test: install
	$(BIN)/python -m pytest tests $(CHAPTERS) --nbval --nbval-current-env --nbval-cell-timeout=300 -p no:cacheprovider
	$(BIN)/jupyter-book build --all -W -n --keep-going .

## make notebooks: after editing a chapter, re-execute it and regenerate the exercise versions
notebooks: install
	$(BIN)/python tools/execute_notebooks.py $(CHAPTERS)
	$(BIN)/python -m attnbook.student

clean:
	rm -rf _build
