from coworkenv.cli import app

app()
