from sqsdelay.cli import main

main()
